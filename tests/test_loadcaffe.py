"""require 'loadcaffe': Caffe models read without protobuf's C++. The caffemodels here are written
with a small protobuf encoder of this file (caffe.proto's field numbers), in both of Caffe's formats
(V2 `layer` with string types, V1 `layers` with enum types); the network loadcaffe.load builds is
checked layer by layer (classes, names, geometry, weights) and its forward pass against numpy."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import luabridge


# --- a protobuf encoder: tools/corpus_caffemodel.py's (caffe.proto's wire format) ---------------
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from corpus_caffemodel import f32, ld, uint, varint  # noqa: E402


def packed_floats(field: int, xs: np.ndarray) -> bytes:
    return ld(field, np.asarray(xs, dtype="<f4").tobytes())


def blob(data: np.ndarray, shape: list[int] | None = None, legacy: tuple | None = None) -> bytes:
    msg = b""
    if legacy:   # num, channels, height, width
        msg += b"".join(uint(i + 1, v) for i, v in enumerate(legacy))
    msg += packed_floats(5, data.ravel())
    if shape:
        msg += ld(7, ld(1, b"".join(varint(d) for d in shape)))
    return msg


def net_v2(layers: list[bytes]) -> bytes:
    return ld(1, b"tiny") + b"".join(ld(100, m) for m in layers)


def layer_v2(name: str, type_: str, *extra: bytes) -> bytes:
    return ld(1, name.encode()) + ld(2, type_.encode()) + b"".join(extra)


def layer_v1(name: str, type_: int, *extra: bytes) -> bytes:
    return ld(4, name.encode()) + uint(5, type_) + b"".join(extra)


@pytest.fixture
def weights():
    rng = np.random.default_rng(5)
    return {"w1": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "b1": rng.standard_normal(4).astype(np.float32),
            "w2": rng.standard_normal((5, 4 * 4 * 4)).astype(np.float32),
            "b2": rng.standard_normal(5).astype(np.float32)}


def caffemodel_v2(w) -> bytes:
    conv = layer_v2("conv1", "Convolution", ld(7, blob(w["w1"], [4, 3, 3, 3])), ld(7, blob(w["b1"], [4])),
                    ld(106, uint(1, 4) + uint(3, 1) + uint(4, 3)))           # num_output, pad 1, kernel 3
    relu = layer_v2("relu1", "ReLU")
    pool = layer_v2("pool1", "Pooling", ld(121, uint(1, 0) + uint(2, 3) + uint(3, 2)))   # MAX, kernel 3, stride 2
    lrn = layer_v2("norm1", "LRN", ld(118, uint(1, 3) + f32(2, 0.0001) + f32(3, 0.75)))
    ip = layer_v2("fc", "InnerProduct", ld(7, blob(w["w2"], [5, 64])), ld(7, blob(w["b2"], [5])), ld(117, uint(1, 5)))
    drop = layer_v2("drop", "Dropout", ld(108, f32(1, 0.25)))
    concat = layer_v2("cat", "Concat")
    prob = layer_v2("prob", "Softmax")
    return net_v2([conv, relu, pool, lrn, ip, drop, concat, prob])


def caffemodel_v1(w) -> bytes:
    conv = layer_v1("conv1", 4, ld(6, blob(w["w1"], legacy=(4, 3, 3, 3))), ld(6, blob(w["b1"], legacy=(1, 1, 1, 4))),
                    ld(10, uint(1, 4) + uint(3, 1) + uint(4, 3)))
    relu = layer_v1("relu1", 18)
    pool = layer_v1("pool1", 17, ld(19, uint(1, 0) + uint(2, 3) + uint(3, 2)))
    lrn = layer_v1("norm1", 15, ld(18, uint(1, 3) + f32(2, 0.0001) + f32(3, 0.75)))
    ip = layer_v1("fc", 14, ld(6, blob(w["w2"], legacy=(1, 1, 5, 64))), ld(6, blob(w["b2"], legacy=(1, 1, 1, 5))),
                  ld(17, uint(1, 5)))
    drop = layer_v1("drop", 6, ld(12, f32(1, 0.25)))
    prob = layer_v1("prob", 20)
    return ld(1, b"tiny") + b"".join(ld(2, m) for m in [conv, relu, pool, lrn, ip, drop, prob])


def reference(w, x):
    """conv 3x3 pad 1 -> relu -> max pool 3 stride 2 ceil -> LRN(3) -> linear -> softmax, in float64."""
    c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    y = np.zeros((4, h, wd))
    for i in range(h):
        for j in range(wd):
            y[:, i, j] = np.tensordot(w["w1"].astype(float), xp[:, i:i + 3, j:j + 3], axes=3) + w["b1"]
    y = np.maximum(y, 0)
    oh = int(np.ceil((h - 3) / 2)) + 1
    p = np.full((4, oh, oh), -np.inf)
    for i in range(oh):
        for j in range(oh):
            p[:, i, j] = y[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3].reshape(4, -1).max(1)
    sq = np.pad(p ** 2, ((1, 1), (0, 0), (0, 0)))
    scale = 1 + 0.0001 / 3 * (sq[:-2] + sq[1:-1] + sq[2:])
    n = p / scale ** 0.75
    z = w["w2"].astype(float) @ n.ravel() + w["b2"]
    e = np.exp(z - z.max())
    return e / e.sum()


@pytest.mark.parametrize("make", [caffemodel_v2, caffemodel_v1])
def test_load_builds_the_network(tmp_path, weights, make):
    path = tmp_path / "tiny.caffemodel"
    path.write_bytes(make(weights))
    proto = tmp_path / "deploy.prototxt"
    proto.write_text("name: 'tiny'\n")   # replaced by the binary model, as in loadcaffe.cpp
    luabridge.require("loadcaffe")
    net = luabridge.eval("function(p, b) return loadcaffe.load(p, b, 'nn') end")(str(proto), str(path))
    info = luabridge.eval("""function(net)
      local rows = {}
      for i = 1, #net.modules do
        local m = net.modules[i]
        rows[i] = {torch.type(m), m.name, m.kW or 0, m.dW or 0, m.padW or 0, m.ceil_mode and 1 or 0}
      end
      return rows end""")(net)
    rows = [tuple(r[k] for k in range(1, 7)) for r in info.values()]
    rows = [tuple(v.decode() if isinstance(v, bytes) else v for v in r) for r in rows]
    assert rows == [("nn.SpatialConvolution", "conv1", 3, 1, 1, 0), ("nn.ReLU", "relu1", 0, 0, 0, 0),
                    ("nn.SpatialMaxPooling", "pool1", 3, 2, 0, 1), ("nn.SpatialCrossMapLRN", "norm1", 0, 0, 0, 0),
                    ("nn.View", "torch_view", 0, 0, 0, 0), ("nn.Linear", "fc", 0, 0, 0, 0),
                    ("nn.Dropout", "drop", 0, 0, 0, 0), ("nn.SoftMax", "prob", 0, 0, 0, 0)]
    get = luabridge.eval("function(net, i, f) return net.modules[i][f] end")
    np.testing.assert_array_equal(luabridge.to_numpy(get(net, 1, "weight")), weights["w1"].astype(float))
    np.testing.assert_array_equal(luabridge.to_numpy(get(net, 6, "bias")), weights["b2"].astype(float))
    assert abs(get(net, 7, "p") - 0.25) < 1e-7
    x = np.random.default_rng(1).standard_normal((3, 8, 8))
    out = luabridge.eval("function(net, x) net:evaluate(); return net:forward(x) end")(net, luabridge.from_numpy(x))
    np.testing.assert_allclose(luabridge.to_numpy(out), reference(weights, x), rtol=1e-5)
    # the model description loadcaffe writes beside the prototxt
    text = (tmp_path / "deploy.prototxt.lua").read_text()
    assert "table.insert(model, {'conv1', nn.SpatialConvolution(3, 4, 3, 3, 1, 1, 1, 1)})" in text
    assert text.rstrip().endswith("return model")


def test_missing_caffemodel_returns_nothing(tmp_path, capfd):
    luabridge.require("loadcaffe")
    got = luabridge.eval("function(p) return loadcaffe.load(p, p .. '.missing', 'nn') end")(str(tmp_path / "x"))
    assert got is None


def test_unknown_backend_is_named():
    with pytest.raises(luabridge.LuaError, match="backend 'ccn2' is not available"):
        luabridge.execute("require 'loadcaffe'; loadcaffe.load('a', 'b', 'ccn2')")
