"""luabridge.torch.load_lua (PyTorch 0.4's torch.utils.serialization.load_lua back): the files real
Torch7 wrote (values from the fixtures' README), files luabridge writes (values against numpy,
dtypes, shared storages, cycles, options and formats), and an nn model whose LuaModule output
equals the model computed in numpy from the file's weights."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import numpy as np  # noqa: E402

import luabridge  # noqa: E402
from helpers import T7_FIXTURES, needs_t7_fixtures  # noqa: E402
from luabridge import t7  # noqa: E402
from luabridge.t7 import Key, TorchObject  # noqa: E402
from luabridge.torch.load import load_lua  # noqa: E402
from luabridge.torch.module import LuaModule  # noqa: E402


@needs_t7_fixtures
def test_real_torch7_tensors():
    d = load_lua(T7_FIXTURES / "doubletensor.t7")
    assert d.dtype == torch.float64
    np.testing.assert_array_equal(d.numpy(), [[1, 2, 3], [4, 5, 6.9]])
    f = load_lua(T7_FIXTURES / "floattensor.t7")
    assert f.dtype == torch.float32 and f.shape == (2, 3, 4)
    assert abs(f.double().sum().item() - 12.97241666913) < 1e-6


@needs_t7_fixtures
def test_real_torch7_tables():
    assert load_lua(T7_FIXTURES / "hello=123.t7") == {"hello": 123}
    assert load_lua(T7_FIXTURES / "list_table.t7") == ["hello", "world", "third item", 123]
    assert load_lua(T7_FIXTURES / "map_table1.t7") == {0: "zero", 1: "hello", 2: "world", 3: "third item", 4: 123}
    assert load_lua(T7_FIXTURES / "map_table2.t7") == {1: "hello", 2: "world", 3: "third item", 4: 123,
                                                       "a": "non number key"}
    assert load_lua(T7_FIXTURES / "tds_hash.t7") == {1: 2, 2: 3, 10: 11}
    assert load_lua(T7_FIXTURES / "tds_vec.t7") == [123, 456]


@needs_t7_fixtures
def test_real_tds_files_with_tds_loaded():
    """Once tds is required, torch.load gives its containers as tds userdata, not tables."""
    luabridge.require("tds")
    assert load_lua(T7_FIXTURES / "tds_hash.t7") == {1: 2, 2: 3, 10: 11}
    assert load_lua(T7_FIXTURES / "tds_vec.t7") == [123, 456]


@needs_t7_fixtures
def test_real_torch7_cycles_stay_cycles():
    kv = load_lua(T7_FIXTURES / "recursive_kv_table.t7")
    (key, value), = kv.items()
    assert isinstance(key, Key) and key.value is kv and value is kv
    obj = load_lua(T7_FIXTURES / "recursive_class.t7", unknownClasses="table")
    assert obj["__typename"] == "A" and obj["a"] is obj


@needs_t7_fixtures
def test_real_torch7_options_reach_the_loader():
    with pytest.raises(luabridge.LuaError, match="unknown Torch class <Blah>"):
        load_lua(T7_FIXTURES / "custom_class.t7")
    assert load_lua(T7_FIXTURES / "custom_class.t7", unknownClasses="table")["__typename"] == "Blah"
    with pytest.raises(luabridge.LuaError, match="function"):
        load_lua(T7_FIXTURES / "function.t7")
    assert load_lua(T7_FIXTURES / "function.t7", functions="skip") is None


@needs_t7_fixtures
def test_real_torch7_nngraph_objects():
    node = load_lua(T7_FIXTURES / "nngraph_node.t7")
    assert isinstance(node, TorchObject) and node.typename == "nngraph.Node"
    assert node.data["annotations"]["hello"] == 123
    g = load_lua(T7_FIXTURES / "gmodule_with_linear_identity.t7")
    assert isinstance(g, LuaModule) and g.lua._typename() == "nn.gModule"
    linear = next(m for m in g.lua.modules if m._typename() == "nn.Linear")
    weight = dict(g.named_parameters())["3.weight"]
    assert weight.shape == (2, 1)
    assert np.shares_memory(weight.detach().numpy(), luabridge.to_numpy(linear.weight))


@needs_t7_fixtures
def test_real_torch7_gmodule_runs_as_lua_module():
    """nngraph's file: inputs {a, b}, output Linear(1 -> 2)(a) + b; the LuaModule's output and
    input gradients against numpy on the weights read in pure Python (luabridge.t7)."""
    path = T7_FIXTURES / "gmodule_with_linear_identity.t7"
    g = load_lua(path)
    linear = next(m for m in t7.read(path).modules if m.typename == "nn.Linear")
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((3, 1)), rng.standard_normal((3, 2))
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y = g([ta, tb])
    np.testing.assert_allclose(y.detach().numpy(), a @ linear.weight.T + linear.bias + b, rtol=0, atol=1e-12)
    grad = rng.standard_normal((3, 2))
    y.backward(torch.from_numpy(grad))
    np.testing.assert_allclose(ta.grad.numpy(), grad @ linear.weight, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), grad, rtol=0, atol=1e-12)


def test_luabridge_files_values_dtypes_and_shared_storage(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 5))
    ints = np.arange(6, dtype=np.int64).reshape(2, 3)
    luabridge.save(tmp_path / "v.t7", {"w": base, "row": base[1], "cols": base[:, 1:3], "ints": ints,
                                       "bytes": np.array([1, 255], dtype=np.uint8),
                                       "f32": base.astype(np.float32), "n": 3, "x": 2.5, "s": "text",
                                       "yes": True, "nested": [ints, {"k": -1}]})
    v = load_lua(tmp_path / "v.t7")
    np.testing.assert_array_equal(v["w"].numpy(), base)
    np.testing.assert_array_equal(v["cols"].numpy(), base[:, 1:3])
    assert v["ints"].dtype == torch.int64 and v["bytes"].dtype == torch.uint8
    assert v["f32"].dtype == torch.float32
    np.testing.assert_array_equal(v["bytes"].numpy(), [1, 255])
    assert (v["n"], v["x"], v["s"], v["yes"]) == (3, 2.5, "text", True)
    assert v["nested"][0] is v["ints"] and v["nested"][1] == {"k": -1}
    v["w"][1, 2] = 100.0   # views of one storage in the file share memory in torch, as in Lua
    assert v["row"][2].item() == 100.0 and v["cols"][1, 1].item() == 100.0


def test_storages_and_ascii_format(tmp_path):
    path = str(tmp_path / "s.t7")
    luabridge.require("torch")
    luabridge.execute(f"torch.save({path!r}, {{torch.FloatStorage({{1, 2, 3.5}}), torch.LongStorage(0)}}, 'ascii')")
    storage, empty = load_lua(path, format="ascii")
    assert storage.dtype == torch.float32 and storage.tolist() == [1, 2, 3.5]
    assert empty.dtype == torch.int64 and empty.numel() == 0


def test_nn_model_as_lua_module_matches_numpy(tmp_path):
    luabridge.require("nn")
    model = luabridge.eval("nn.Sequential():add(nn.Linear(4, 6)):add(nn.Tanh()):add(nn.Linear(6, 2))")
    luabridge.save(tmp_path / "m.t7", {"model": model, "epoch": 7})
    checkpoint = load_lua(tmp_path / "m.t7")
    assert checkpoint["epoch"] == 7
    m = checkpoint["model"]
    assert isinstance(m, LuaModule)
    weights = t7.read(tmp_path / "m.t7")["model"].modules   # the file read in pure Python
    x = np.random.default_rng(5).standard_normal((3, 4))
    hidden = np.tanh(x @ weights[0].weight.T + weights[0].bias)
    want = hidden @ weights[2].weight.T + weights[2].bias
    np.testing.assert_allclose(m(torch.from_numpy(x)).detach().numpy(), want, rtol=0, atol=1e-12)


def test_missing_file_is_a_lua_error(tmp_path):
    with pytest.raises(luabridge.LuaError, match="no such file"):
        load_lua(tmp_path / "absent.t7")
