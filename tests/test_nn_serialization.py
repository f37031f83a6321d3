"""nn modules in .t7 files: every nn class (tests/nn_cases.py) survives torch.serialize /
torch.deserialize in binary and ascii with its class, parameters, outputs and gradients exactly;
shared parameters stay shared; modules as torch7 (older versions) and cudnn wrote them load as our
nn classes with torch7's upgrades, checked against numpy; gModules (the real torch7 fixture and
our own) load and run."""
from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import luabridge
from helpers import N, T7_FIXTURES as FIXTURES, lua_fn, needs_t7_fixtures as needs_fixtures
from nn_cases import CRITERIONS, MODULES

CLASS_LISTS = Path(__file__).resolve().parents[1] / "lua" / "nn" / "classes"

# check(ctor, input, target, format): nil when the module (or criterion) ctor makes behaves the
# same after a round trip, else what differs. Seeded: random layers draw the same numbers.
_CHECK = lua_fn(r"""function(ctor, inputExpr, targetExpr, fmt)
  require 'nn'
  local env = setmetatable({ R = torch.randn, L = torch.LongTensor, B = torch.ByteTensor,
    P = function(...) return torch.rand(...):add(0.5) end }, { __index = _G })
  local function eval(expr) return setfenv(assert(loadstring('return ' .. expr)), env)() end
  local function copy(x)
    if torch.isTensor(x) then return x:clone() end
    if type(x) ~= 'table' then return x end
    local t = {}
    for k, v in pairs(x) do t[k] = copy(v) end
    return t
  end
  local function randLike(x)
    if torch.isTensor(x) then return torch.randn(x:size()):typeAs(x) end
    if type(x) ~= 'table' then return 1 end
    local t = {}
    for k, v in pairs(x) do t[k] = randLike(v) end
    return t
  end
  local function differ(a, b, where)
    if torch.isTensor(a) or torch.isTensor(b) then
      if torch.type(a) ~= torch.type(b) then return where .. ': ' .. torch.type(a) .. ' vs ' .. torch.type(b) end
      if not a:isSameSizeAs(b) then return where .. ': sizes differ' end
      if a:nElement() > 0 and a:double():ne(b:double()):sum() > 0 then return where .. ': values differ' end
    elseif type(a) == 'table' and type(b) == 'table' then
      for k, v in pairs(a) do
        local d = differ(v, b[k], where .. '[' .. tostring(k) .. ']')
        if d then return d end
      end
      for k in pairs(b) do if a[k] == nil then return where .. '[' .. tostring(k) .. '] is extra' end end
    elseif a ~= b and not (a ~= a and b ~= b) then
      return where .. ': ' .. tostring(a) .. ' vs ' .. tostring(b)
    end
  end
  local isCriterion = targetExpr ~= nil
  local function step(m, x, t, g)
    torch.manualSeed(3)
    if isCriterion then return { m:forward(x, t), copy(m:backward(x, t)) } end
    m:zeroGradParameters()
    local r = { copy(m:forward(x)), copy(m:backward(x, g)) }
    r[3], r[4] = m:parameters()
    r[3], r[4] = copy(r[3]), copy(r[4])
    return r
  end
  torch.manualSeed(1)
  local m = eval(ctor)
  local x, t = eval(inputExpr), targetExpr and eval(targetExpr)
  local g = (not isCriterion) and randLike(m:forward(x)) or nil
  step(m, x, t, g)                          -- state and buffers filled before the save
  local m2 = torch.deserialize(torch.serialize(m, fmt), fmt)
  if torch.typename(m2) ~= torch.typename(m) then return 'loaded as ' .. tostring(torch.typename(m2)) end
  if not isCriterion then
    local d = differ(m:parameters() or {}, m2:parameters() or {}, 'parameters')
    if d then return d end
  end
  return differ(step(m, x, t, g), step(m2, x, t, g), 'step')
end""")

_FORMATS = ["binary", "ascii"]


@pytest.fixture(scope="module")
def nn(lua):
    lua.require("nngraph")
    return lua


def _classes(group: str) -> list[str]:
    return re.findall(r"'(\w+)'", (CLASS_LISTS / f"{group}.lua").read_text())


def test_every_class_has_a_round_trip_case():
    abstract = {"utils", "Module", "Criterion", "Container", "Jacobian", "SparseJacobian", "hessian"}
    names = [n for g in ("framework", "layers", "convolution", "tables", "criterions") for n in _classes(g)]
    built = " ".join(c[0] for c in MODULES + CRITERIONS)
    missing = [n for n in names if n not in abstract and f"nn.{n}(" not in built]
    assert not missing


@pytest.mark.parametrize("fmt", _FORMATS)
@pytest.mark.parametrize("ctor,inp", MODULES, ids=[c for c, _ in MODULES])
def test_module_round_trip(nn, ctor, inp, fmt):
    assert _CHECK(ctor, inp, None, fmt) is None


@pytest.mark.parametrize("fmt", _FORMATS)
@pytest.mark.parametrize("ctor,inp,target", CRITERIONS, ids=[c for c, _, _ in CRITERIONS])
def test_criterion_round_trip(nn, ctor, inp, target, fmt):
    assert _CHECK(ctor, inp, target, fmt) is None


@pytest.mark.parametrize("fmt", _FORMATS)
def test_shared_parameters_stay_shared(nn, fmt):
    run = lua_fn("""function(fmt)
      local a = nn.Linear(3, 4)
      local net = nn.Sequential():add(a):add(a:clone('weight', 'bias', 'gradWeight', 'gradBias'))
        :add(nn.Tanh()):add(nn.Linear(4, 2))
      local m = torch.deserialize(torch.serialize(net, fmt), fmt)
      local l1, l2 = m:get(1), m:get(2)
      local shared = torch.pointer(l1.weight:storage()) == torch.pointer(l2.weight:storage())
        and torch.pointer(l1.gradBias:storage()) == torch.pointer(l2.gradBias:storage())
      local apart = torch.pointer(l1.weight:storage()) ~= torch.pointer(a.weight:storage())
      l1.weight:fill(0.25)
      local flat = m:getParameters()
      return shared, apart, l2.weight:clone(), flat:nElement()
    end""")
    shared, apart, w2, n = run(fmt)
    assert shared and apart
    np.testing.assert_array_equal(N(w2), np.full((4, 3), 0.25))
    assert n == 3 * 4 + 4 + 4 * 2 + 2          # the shared pair counts once


@pytest.mark.parametrize("fmt", _FORMATS)
def test_flattened_parameters_stay_one_storage(nn, fmt):
    run = lua_fn("""function(fmt)
      local net = nn.Sequential():add(nn.Linear(3, 4)):add(nn.Linear(4, 2))
      local flat = net:getParameters()
      local m = torch.deserialize(torch.serialize(net, fmt), fmt)
      local s = m:get(1).weight:storage()
      return torch.pointer(s) == torch.pointer(m:get(2).bias:storage()), s:size(), flat:nElement()
    end""")
    same, size, n = run(fmt)
    assert same and size == n == 3 * 4 + 4 + 4 * 2 + 2


@pytest.mark.parametrize("ctor,field,typename", [
    ("nn.TanhShrink()", b"tanh", b"nn.Tanh"),
    ("nn.MultiLabelSoftMarginCriterion()", b"sigmoid", b"nn.Sigmoid"),
    ("nn.CMaxTable()", b"maxVals", None),
    ("nn.Bottle(nn.Linear(3, 4), 2)", b"inShape", None),
    ("nn.CReLU(1)", b"modules", None),
])
def test_saved_modules_hold_what_torch7_uses(nn, tmp_path, ctor, field, typename):
    """Buffers and sub-modules torch7's code uses without making them are in the files we write
    (read here by torchfile, another reader); read back by us, the module is as it was."""
    torchfile = pytest.importorskip("torchfile")
    path = tmp_path / "m.t7"
    lua_fn(f"function(p) torch.save(p, {ctor}) end")(str(path))
    value = torchfile.load(str(path))._obj[field]
    if typename:
        assert value._typename == typename
    elif field == b"modules":
        assert [m._typename for m in value] == [b"nn.ConcatTable", b"nn.JoinTable", b"nn.ReLU"]
    else:
        assert isinstance(value, np.ndarray) and value.dtype == np.float64
    again = lua_fn("function(p) local m = torch.load(p); return torch.type(m), m.modules == nil end")(str(path))
    assert again == (ctor.split("(")[0], ctor != "nn.Bottle(nn.Linear(3, 4), 2)")


# ---- files as torch7 and cudnn wrote them ------------------------------------------------------
# A small writer of torch7's binary format (8-byte long), independent of ours, so that the
# tests below can make modules with the fields older torch7 versions and cudnn saved.

class Obj:
    """A torch object: class name, version and its fields (after the objects in `before`, for
    classes whose write method puts those first)."""

    def __init__(self, cls: str, fields: dict, version: int = 1, before: tuple = ()) -> None:
        self.cls, self.fields, self.version, self.before = cls, fields, version, before


class LongStorage(list):
    pass


class Expanded:
    """A DoubleTensor of `size` elements all viewing one stored value (stride 0)."""

    def __init__(self, value: float, size: int) -> None:
        self.value, self.size = value, size


class Cuda:
    """A torch.CudaTensor (float32) holding array's values."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.asarray(array, dtype=np.float32)


_KINDS = {np.dtype(np.int64): ("Long", np.int64), np.dtype(np.float64): ("Double", np.float64)}


def _encode(value: Any) -> bytes:
    """value in torch7's binary format: None, bools, numbers, strings, dicts and lists (tables),
    int64 / float64 arrays (Long / Double tensors), Cuda, Expanded, LongStorage and Obj; an
    object met again is written as a reference."""
    out: list[bytes] = []
    seen: dict[int, int] = {}
    alive: list[Any] = []      # keeps the objects numbered by id() alive, so ids stay unique

    def i32(n: int) -> None:
        out.append(struct.pack("<i", n))

    def raw_string(s: str) -> None:
        b = s.encode()
        i32(len(b))
        out.append(b)

    def start(code: int, obj: Any) -> bool:
        """Writes the code and index; False when obj was written before (a reference)."""
        i32(code)
        alive.append(obj)
        if id(obj) in seen:
            i32(seen[id(obj)])
            return False
        seen[id(obj)] = len(seen) + 1
        i32(seen[id(obj)])
        return True

    def torch_header(obj: Any, cls: str, version: int = 1) -> bool:
        if not start(4, obj):
            return False
        raw_string(f"V {version}")
        raw_string(cls)
        return True

    def put_tensor(v: Any, kind: str, sizes: tuple, strides: tuple, data: bytes, n: int) -> None:
        if torch_header(v, f"torch.{kind}Tensor"):
            dims = len(sizes)
            out.append(struct.pack(f"<i{dims}q{dims}qq", dims, *sizes, *strides, 1))   # offset + 1
            if torch_header(object(), f"torch.{kind}Storage"):
                out.append(struct.pack("<q", n) + data)

    def put_array(v: Any) -> None:
        kind, dtype = _KINDS.get(getattr(v, "dtype", None), ("Cuda", np.float32))
        a = np.ascontiguousarray(getattr(v, "array", v), dtype=dtype)
        put_tensor(v, kind, a.shape, tuple(s // a.itemsize for s in a.strides), a.tobytes(), a.size)

    def put_table(v: Any) -> None:
        if start(3, v):
            items = list(v.items()) if isinstance(v, dict) else list(enumerate(v, 1))
            i32(len(items))
            for k, x in items:
                put(k)
                put(x)

    def put(v: Any) -> None:
        if v is None:
            i32(0)
        elif isinstance(v, bool):
            i32(5)
            i32(int(v))
        elif isinstance(v, (int, float)):
            i32(1)
            out.append(struct.pack("<d", v))
        elif isinstance(v, str):
            i32(2)
            raw_string(v)
        elif isinstance(v, LongStorage):
            if torch_header(v, "torch.LongStorage"):
                out.append(struct.pack(f"<q{len(v)}q", len(v), *v))
        elif isinstance(v, (np.ndarray, Cuda)):
            put_array(v)
        elif isinstance(v, Expanded):
            put_tensor(v, "Double", (v.size,), (0,), struct.pack("<d", v.value), 1)
        elif isinstance(v, Obj):
            if torch_header(v, v.cls, v.version):
                for x in v.before:
                    put(x)
                put(v.fields)
        elif isinstance(v, (dict, list)):
            put_table(v)
        else:
            raise TypeError(type(v))

    put(value)
    return b"".join(out)


def _module_fields(**fields: Any) -> dict:
    return {"output": np.zeros(0), "gradInput": np.zeros(0), **fields}


_LOAD_RUN = lua_fn("""function(path, x, g)
  require 'nn'
  local m = torch.load(path)
  local y = m:forward(x):clone()
  local gi = g and m:backward(x, g):clone()
  return torch.type(m), y, gi, m
end""")


def _load_run(tmp_path: Path, obj: Obj, x: np.ndarray, g: np.ndarray = None) -> tuple:
    path = tmp_path / "m.t7"
    path.write_bytes(_encode(obj))
    cls, y, gi, m = _LOAD_RUN(str(path), x, g)
    return cls, N(y), (N(gi) if g is not None else None), m


def test_batch_normalization_v1_running_std(nn, tmp_path, rng):
    """torch7 BN files of version 1 hold running_std = 1/sqrt(var + eps); read, the module holds
    running_var and computes the evaluation-mode normalization from it."""
    n, eps = 3, 1e-3
    var = rng.uniform(0.5, 2, n)
    mean, w, b = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    std = 1 / np.sqrt(var + eps)
    obj = Obj("nn.BatchNormalization", _module_fields(
        running_mean=mean, running_std=std, weight=w, bias=b, gradWeight=np.zeros(n), gradBias=np.zeros(n),
        eps=eps, momentum=0.1, affine=True))   # no `train`: torch7 ran it in evaluation mode
    x = rng.standard_normal((4, n))
    cls, y, _, m = _load_run(tmp_path, obj, x)
    assert cls == "nn.BatchNormalization" and m.running_std is None
    np.testing.assert_allclose(N(m.running_var), 1 / std ** 2 - eps, rtol=1e-12)
    np.testing.assert_allclose(y, (x - mean) * std * w + b, rtol=1e-10, atol=1e-12)


def test_batch_normalization_v2_keeps_fields(nn, tmp_path, rng):
    """version 2 files are taken as they are; cudnn.SpatialBatchNormalization reads as nn's."""
    n, eps = 2, 1e-5
    mean, var = rng.standard_normal(n), rng.uniform(0.5, 2, n)
    obj = Obj("cudnn.SpatialBatchNormalization", _module_fields(
        running_mean=mean, running_var=var, weight=np.ones(n), bias=np.zeros(n), eps=eps,
        momentum=0.1, affine=True, train=False, iSize=LongStorage([0, 0, 0, 0])), version=2)
    x = rng.standard_normal((2, n, 3, 3))
    cls, y, _, _ = _load_run(tmp_path, obj, x)
    assert cls == "nn.SpatialBatchNormalization"
    want = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + eps)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)


def _conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """planes x H x W input, out x in x kH x kW weight, stride 1."""
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    y = np.empty((w.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, i, j] = np.tensordot(w, xp[:, i:i + kh, j:j + kw], axes=3) + b
    return y


@pytest.mark.parametrize("cls", ["nn.SpatialConvolution", "cudnn.SpatialConvolution"])
def test_old_and_cudnn_spatial_convolution(nn, tmp_path, rng, cls):
    """torch7's old files: `padding` instead of padW/padH and a 2D (SpatialConvolutionMM) weight;
    cudnn's: extra fields (iSize, groups); both run as nn.SpatialConvolution."""
    w, b = rng.standard_normal((3, 2, 3, 3)), rng.standard_normal(3)
    fields = _module_fields(nInputPlane=2, nOutputPlane=3, kW=3, kH=3, dW=1, dH=1, bias=b,
                            gradBias=np.zeros(3))
    if cls == "nn.SpatialConvolution":
        fields.update(padding=1, weight=w.reshape(3, -1), gradWeight=np.zeros((3, 18)))
    else:
        fields.update(padW=1, padH=1, weight=w, gradWeight=np.zeros_like(w), groups=1,
                      iSize=LongStorage([0, 0, 0, 0]))
    x = rng.standard_normal((2, 4, 5))
    name, y, _, m = _load_run(tmp_path, Obj(cls, fields), x)
    assert name == "nn.SpatialConvolution" and (m.padW, m.padH) == (1, 1) and m.padding is None
    assert tuple(N(m.weight).shape) == (3, 2, 3, 3)
    np.testing.assert_allclose(y, _conv2d(x, w, b, 1), rtol=1e-10, atol=1e-12)


def test_cudnn_grouped_convolution_is_refused(nn, tmp_path):
    fields = _module_fields(nInputPlane=4, nOutputPlane=2, kW=1, kH=1, dW=1, dH=1, padW=0, padH=0,
                            groups=2, weight=np.ones((2, 2, 1, 1)), bias=np.zeros(2))
    path = tmp_path / "g.t7"
    path.write_bytes(_encode(Obj("cudnn.SpatialConvolution", fields)))
    with pytest.raises(luabridge.LuaError, match=r"grouped convolutions \(cudnn groups = 2\) are not supported"):
        lua_fn("function(p) return torch.load(p) end")(str(path))


def test_cudnn_temporal_convolution(nn, tmp_path, rng):
    """cudnn.TemporalConvolution is a 1-plane spatial convolution (kH, dH: kernel and stride in
    time) with nn.TemporalConvolution's weight layout."""
    frame, out, k = 3, 2, 2
    w, b = rng.standard_normal((out, k * frame)), rng.standard_normal(out)
    fields = _module_fields(inputFrameSize=frame, outputFrameSize=out, nInputPlane=1, nOutputPlane=out,
                            kW=frame, kH=k, dW=1, dH=1, padW=0, padH=0, groups=1, weight=w, bias=b,
                            gradWeight=np.zeros_like(w), gradBias=np.zeros(out))
    x = rng.standard_normal((5, frame))
    name, y, _, m = _load_run(tmp_path, Obj("cudnn.TemporalConvolution", fields), x)
    assert name == "nn.TemporalConvolution" and (m.kW, m.dW) == (k, 1)
    want = np.stack([w @ x[t:t + k].reshape(-1) + b for t in range(5 - k + 1)])
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)


def _windows(x: np.ndarray, k: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums of the k x k windows (stride 1) of each padded plane, and the in-image counts."""
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    ones = np.pad(np.ones(x.shape[1:]), pad)
    o = xp.shape[1] - k + 1
    sums = np.stack([[[xp[c, i:i + k, j:j + k].sum() for j in range(o)] for i in range(o)]
                     for c in range(x.shape[0])])
    counts = np.array([[ones[i:i + k, j:j + k].sum() for j in range(o)] for i in range(o)])
    return sums, counts


def test_old_average_pooling_sums(nn, tmp_path, rng):
    """torch7 files from before `divide` (and ceil_mode, padding) give window sums."""
    fields = _module_fields(kW=2, kH=2, dW=1, dH=1)
    x = rng.standard_normal((2, 4, 4))
    _, y, _, _ = _load_run(tmp_path, Obj("nn.SpatialAveragePooling", fields), x)
    np.testing.assert_allclose(y, _windows(x, 2, 0)[0], rtol=1e-12)


@pytest.mark.parametrize("cls", ["nn.SpatialMaxPooling", "cudnn.SpatialMaxPooling"])
def test_old_and_cudnn_max_pooling(nn, tmp_path, rng, cls):
    """Older torch7 files lack ceil_mode and padding; cudnn's have a mode."""
    fields = _module_fields(kW=2, kH=2, dW=2, dH=2)
    if cls.startswith("cudnn"):
        fields.update(padW=0, padH=0, ceil_mode=False, mode="CUDNN_POOLING_MAX", iSize=LongStorage([0] * 4))
    x = rng.standard_normal((2, 4, 6))
    name, y, _, _ = _load_run(tmp_path, Obj(cls, fields), x)
    assert name == "nn.SpatialMaxPooling"
    np.testing.assert_array_equal(y, x.reshape(2, 2, 2, 3, 2).max(axis=(2, 4)))


@pytest.mark.parametrize("mode", ["CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING",
                                  "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING"])
def test_cudnn_average_pooling_modes(nn, tmp_path, rng, mode):
    fields = _module_fields(kW=3, kH=3, dW=1, dH=1, padW=1, padH=1, ceil_mode=False, mode=mode,
                            iSize=LongStorage([0, 0, 0, 0]))
    x = rng.standard_normal((2, 4, 4))
    name, y, _, _ = _load_run(tmp_path, Obj("cudnn.SpatialAveragePooling", fields), x)
    sums, counts = _windows(x, 3, 1)
    assert name == "nn.SpatialAveragePooling"
    np.testing.assert_allclose(y, sums / (counts if "EXCLUDE" in mode else 9), rtol=1e-12)


@pytest.mark.parametrize("cls,fields,ref", [
    ("cudnn.ReLU", {"inplace": False, "mode": "CUDNN_ACTIVATION_RELU"}, lambda x: np.maximum(x, 0)),
    ("cudnn.ClippedReLU", {"inplace": False, "ceiling": 0.5}, lambda x: np.clip(x, 0, 0.5)),
    ("nn.ReLU6", {"inplace": False}, lambda x: np.clip(x, 0, 6)),
    ("cudnn.Tanh", {"inplace": False, "mode": "CUDNN_ACTIVATION_TANH"}, np.tanh),
    ("nn.Threshold", {"threshold": 0.1, "val": -2.0}, lambda x: np.where(x > 0.1, x, -2.0)),
    ("nn.HardTanh", {}, lambda x: np.clip(x, -1, 1)),
    ("nn.Dropout", {"p": 0.25, "train": False}, lambda x: x * 0.75),   # no v2: version 1 dropout
    ("nn.Mean", {"dimension": 2}, lambda x: x.mean(1)),                 # from before Mean was a Sum
    ("nn.Sum", {"dimension": 1}, lambda x: x.sum(0)),
    ("nn.Replicate", {"nfeatures": 2}, lambda x: np.broadcast_to(x, (2, 3, 4))),
    ("nn.Linear", {"weight": np.arange(8.0).reshape(2, 4)}, lambda x: x @ np.arange(8.0).reshape(2, 4).T),
])
def test_modules_without_newer_fields(nn, tmp_path, rng, cls, fields, ref):
    """cudnn's pointwise modules and older torch7 ones lack fields our classes use."""
    x = rng.standard_normal((3, 4)) * 4
    _, y, _, _ = _load_run(tmp_path, Obj(cls, _module_fields(**fields)), x)
    np.testing.assert_allclose(y, ref(x), rtol=1e-12)


def test_criterions_without_newer_fields(nn, tmp_path, rng):
    """HingeEmbeddingCriterion from before sizeAverage averages; MultiMarginCriterion from
    before p uses p = 1."""
    run = lua_fn("function(p, x, y) return torch.load(p):forward(x, y) end")
    x, y = rng.standard_normal(5), np.array([1.0, -1, -1, 1, -1])
    path = tmp_path / "c.t7"
    path.write_bytes(_encode(Obj("nn.HingeEmbeddingCriterion", {"margin": 0.5, "gradInput": np.zeros(0)})))
    assert run(str(path), x, y) == pytest.approx(np.where(y > 0, x, np.maximum(0, 0.5 - x)).mean(), rel=1e-12)
    x, t = rng.standard_normal((3, 4)), np.array([2, 4, 1])
    path.write_bytes(_encode(Obj("nn.MultiMarginCriterion", {"margin": 1.0, "sizeAverage": True, "gradInput": np.zeros(0)})))
    margins = np.maximum(0, 1 - x[np.arange(3), t - 1][:, None] + x)
    margins[np.arange(3), t - 1] = 0
    assert run(str(path), x, t.astype(np.int64)) == pytest.approx(margins.sum(1).mean() / 4, rel=1e-12)


def test_cudnn_softmax_and_lrn_k(nn, tmp_path, rng):
    x = rng.standard_normal((2, 5))
    fields = _module_fields(mode="CUDNN_SOFTMAX_MODE_INSTANCE", algorithm="CUDNN_SOFTMAX_LOG")
    name, y, _, _ = _load_run(tmp_path, Obj("cudnn.LogSoftMax", fields), x)
    assert name == "nn.LogSoftMax"
    np.testing.assert_allclose(y, x - np.log(np.exp(x).sum(1, keepdims=True)), rtol=1e-12)
    lrn = _module_fields(size=3, alpha=1e-4, beta=0.75, K=2.0)
    _, _, _, m = _load_run(tmp_path, Obj("cudnn.SpatialCrossMapLRN", lrn), rng.standard_normal((1, 4, 2, 2)))
    assert m.k == 2.0 and m.K is None


def test_gradient_reversal_v1_and_profile_timer(nn, tmp_path, rng):
    """GradientReversal from before `lambda` reverses with 1; nn.Profile's torch.Timer is saved
    as nothing by torch7 and comes back as a new timer."""
    x, g = rng.standard_normal(4), rng.standard_normal(4)
    _, y, gi, _ = _load_run(tmp_path, Obj("nn.GradientReversal", _module_fields()), x, g)
    np.testing.assert_array_equal(gi, -g)
    path = tmp_path / "p.t7"
    lua_fn("""function(p) torch.save(p, nn.Profile(nn.Tanh(), 1e9)) end""")(str(path))
    _, y, _, m = _LOAD_RUN(str(path), x, None)
    np.testing.assert_allclose(N(y), np.tanh(x), rtol=1e-12)
    assert lua_fn("function(m) return torch.type(m.timer), m.timer:time().real >= 0 end")(m) == ("torch.Timer", True)


def test_gpu_checkpoint_data_parallel_table(nn, tmp_path, rng):
    """A model saved on GPUs: a cunn DataParallelTable (torch7's layout, version 3) around a
    Sequential of cudnn modules with CUDA tensors; it loads and runs on the CPU."""
    w, b = rng.standard_normal((2, 3)), rng.standard_normal(2)

    def fields(**kw: Any) -> dict:
        return {"output": Cuda(np.zeros(0)), "gradInput": Cuda(np.zeros(0)), **kw}

    linear = Obj("nn.Linear", fields(weight=Cuda(w), bias=Cuda(b), gradWeight=Cuda(np.zeros((2, 3))),
                                     gradBias=Cuda(np.zeros(2))))
    relu = Obj("cudnn.ReLU", fields(inplace=True, mode="CUDNN_ACTIVATION_RELU"))
    seq = Obj("nn.Sequential", fields(modules=[linear, relu]))
    gpus = [1, 2]
    dpt_fields = fields(modules=[seq], gpuAssignments=gpus, dimension=1, typeStr="torch.CudaTensor",
                        flattenParams=False, usenccl=False, needsSync=False, inputGpu={}, outputGpu={})
    dpt = Obj("nn.DataParallelTable", dpt_fields, version=3, before=(gpus,))
    dpt_fields["impl"] = Obj("nn.DataParallelTable.Basic", {"dpt": dpt})
    x = rng.standard_normal((4, 3)).astype(np.float32)
    name, y, _, m = _load_run(tmp_path, dpt, x)
    assert name == "nn.DataParallelTable" and m.impl is None and len(m.gpuAssignments) == 2
    np.testing.assert_allclose(y, np.maximum(x @ w.T.astype(np.float32) + b.astype(np.float32), 0), rtol=1e-5)
    again = lua_fn("function(m) local c = torch.deserialize(torch.serialize(m)); return torch.type(c), #c.gpuAssignments end")
    assert again(m) == ("nn.DataParallelTable", 2)


@pytest.mark.parametrize("cls,fields,message", [
    ("nn.BatchNormalization", {"running_std": Expanded(1.0, 10 ** 12), "eps": 1e-5},
     "field running_std is not a tensor within its storage"),
    ("nn.Bottle", {"nInputDim": 1e12, "nOutputDim": 2, "modules": []}, "field nInputDim is 1000000000000,"),
    ("nn.SpatialSubtractiveNormalization", {"nInputPlane": 1e9, "kernel": np.ones((3, 3))},
     "field nInputPlane is 1000000000"),
    ("nn.SpatialDivisiveNormalization", {"nInputPlane": 2, "kernel": Expanded(1.0, 10 ** 6)},
     "field kernel is not a tensor within its storage"),
    ("nn.WeightNorm", {"weightSize": LongStorage([10 ** 6, 10 ** 6]), "v": np.ones((2, 2)), "modules": []},
     "and weightSize do not fit together"),
])
def test_hostile_fields_do_not_allocate(nn, tmp_path, cls, fields, message):
    """The read upgrades compute from the file's fields; sizes that would make huge tensors are
    refused before anything is allocated."""
    path = tmp_path / "bad.t7"
    path.write_bytes(_encode(Obj(cls, _module_fields(**fields))))
    with pytest.raises(luabridge.LuaError, match=message):
        lua_fn("function(p) return torch.load(p) end")(str(path))


def test_unknown_cudnn_class_is_named(nn, tmp_path):
    path = tmp_path / "lstm.t7"
    path.write_bytes(_encode(Obj("cudnn.LSTM", _module_fields())))
    with pytest.raises(luabridge.LuaError, match=r"unknown Torch class <cudnn.LSTM>"):
        lua_fn("function(p) return torch.load(p) end")(str(path))


@pytest.mark.parametrize("fmt", _FORMATS)
def test_weight_norm_file_layout(nn, tmp_path, fmt):
    """WeightNorm saves v, g and weightSize but not the weight (rebuilt on read), as torch7; a
    torch7 one (g, gradG 1-D, gradV in the weight's layout) reads the same."""
    run = lua_fn("""function(path, fmt, torch7Layout)
      torch.manualSeed(5)
      local m = nn.WeightNorm(nn.SpatialConvolution(2, 3, 2, 2), 1)
      local x = torch.randn(2, 2, 3, 3)
      local g = torch.randn(m:forward(x):size())
      m:backward(x, g)
      if torch7Layout then
        m.g, m.gradG, m.gradV = m.g:view(-1), m.gradG:view(-1), m.gradV:view(m.weight:size())
      end
      torch.save(path, m, fmt)
      local m2 = torch.load(path, fmt)
      local same = m2.weight == m2.modules[1].weight
      m:zeroGradParameters(); m2:zeroGradParameters()
      local y1, y2 = m:forward(x):clone(), m2:forward(x):clone()
      local g1, g2 = m:backward(x, g):clone(), m2:backward(x, g):clone()
      return same, (y1 - y2):abs():max(), (g1 - g2):abs():max(), (m.gradV:view(-1) - m2.gradV:view(-1)):abs():max()
    end""")
    path = tmp_path / "wn.t7"
    for torch7_layout in (False, True):
        same, dy, dg, dv = run(str(path), fmt, torch7_layout)
        assert same and dy == dg == dv == 0
    torchfile = pytest.importorskip("torchfile")
    if fmt == "binary":
        fields = torchfile.load(str(path))._obj
        assert b"weight" not in fields and b"gradWeight" not in fields
        assert list(fields[b"weightSize"]) == [3, 2, 2, 2]


# ---- nngraph ------------------------------------------------------------------------------------

@needs_fixtures
def test_torch7_gmodule_fixture_runs(nn, rng):
    """The torch7 nngraph file: gModule({a, b}, {CAddTable(){b, Linear(1, 2)(a)}})."""
    run = lua_fn("""function(path, a, b, g)
      require 'nngraph'
      local m = torch.load(path)
      local y = m:forward({a, b}):clone()
      local gi = m:backward({a, b}, g)
      local lin = m.modules[3]
      return torch.type(m), m.nInputs, #m.forwardnodes, y, gi[1]:clone(), gi[2]:clone(),
        lin.weight:clone(), lin.bias:clone(), torch.type(m.fg), torch.type(m.innode)
    end""")
    a, b, g = rng.standard_normal((4, 1)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    cls, n_in, n_nodes, y, ga, gb, w, bias, fg, innode = run(str(FIXTURES / "gmodule_with_linear_identity.t7"), a, b, g)
    assert (cls, n_in, n_nodes, fg, innode) == ("nn.gModule", 2, 9, "graph.Graph", "nngraph.Node")
    w, bias = N(w), N(bias)
    np.testing.assert_allclose(N(y), b + a @ w.T + bias, rtol=1e-12)
    np.testing.assert_allclose(N(ga), g @ w, rtol=1e-12)
    np.testing.assert_array_equal(N(gb), g)
    torchfile = pytest.importorskip("torchfile", reason="independent check of the weights")
    nodes = torchfile.load(str(FIXTURES / "gmodule_with_linear_identity.t7"))._obj[b"modules"]
    np.testing.assert_array_equal(w, nodes[2]._obj[b"weight"])
    np.testing.assert_array_equal(bias, nodes[2]._obj[b"bias"])


@needs_fixtures
def test_torch7_nngraph_node_fixture(nn):
    run = lua_fn("""function(path)
      require 'nngraph'
      local n = torch.load(path)
      return torch.type(n), n.data.annotations.hello, #n.children, n.id
    end""")
    assert run(str(FIXTURES / "nngraph_node.t7")) == ("nngraph.Node", 123, 0, 0)


@pytest.mark.parametrize("fmt", _FORMATS)
def test_our_gmodule_round_trip(nn, fmt):
    """A gModule with a split, a fan-out and two outputs: saved and loaded, it gives the same
    outputs and gradients, and new nodes can still be wired to its nodes' graph classes."""
    run = lua_fn("""function(fmt)
      require 'nngraph'
      torch.manualSeed(2)
      local x = nn.Identity()()
      local h = nn.Tanh()(nn.Linear(3, 4)(x))
      local p1, p2 = nn.SplitTable(2)(nn.Reshape(2, 2)(h)):split(2)
      local g = nn.gModule({x}, {nn.CAddTable()({p1, p2}), nn.Linear(4, 1)(h)})
      local input, go = torch.randn(5, 3), {torch.randn(5, 2), torch.randn(5, 1)}
      local m = torch.deserialize(torch.serialize(g, fmt), fmt)
      local res = {}
      for i, net in ipairs { g, m } do
        net:zeroGradParameters()
        local y = net:forward(input)
        res[i] = { y[1]:clone(), y[2]:clone(), net:backward(input, go):clone(), net:getParameters():clone() }
      end
      local d = 0
      for k = 1, 4 do d = math.max(d, (res[1][k] - res[2][k]):abs():max()) end
      local n = nngraph.Node({ annotations = {} })
      n:add(m.forwardnodes[2], true)
      return torch.type(m), d, #m.modules, m.fg.nodes[m.innode] ~= nil
    end""")
    cls, d, n_modules, indexed = run(fmt)
    assert cls == "nn.gModule" and d == 0 and n_modules == 7 and indexed


def test_our_gmodule_file_reads_independently(nn, tmp_path):
    """The torchfile package (another reader of torch7's format) reads a gModule we saved with
    torch7's nngraph structure."""
    torchfile = pytest.importorskip("torchfile")
    path = tmp_path / "g.t7"
    lua_fn("""function(path)
      local x = nn.Identity()()
      local g = nn.gModule({x}, {nn.Tanh()(nn.Linear(3, 2)(x))})
      g:forward(torch.randn(4, 3))
      torch.save(path, g:clearState())
    end""")(str(path))
    g = torchfile.load(str(path))
    assert g._typename == b"nn.gModule" and g._obj[b"nInputs"] == 1
    fg = g._obj[b"fg"]
    assert fg._typename == b"graph.Graph" and len([k for k in fg._obj[b"nodes"] if isinstance(k, int)]) == 5
    assert [m._typename for m in g._obj[b"modules"]] == [b"nn.Identity", b"nn.Linear", b"nn.Tanh"]
