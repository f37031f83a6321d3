"""PyTorch tensors passed straight to proxies (m.forward(torch_tensor)): shared with Lua without
a copy, whatever their strides; results stay Lua tensor proxies."""
import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'luabridge[torch]')")

import luabridge  # noqa: E402

luabridge.require("torch")


def lua_function(source: str):
    """A Lua function as a proxy (its arguments converted as for any proxy call)."""
    return luabridge.wrap(luabridge.eval(source))


TYPE_OF = lua_function("function(t) return torch.type(t) end")
FILL = lua_function("function(t, v) t:fill(v) end")
SUM = lua_function("function(t) return t:sum() end")


def _linear(n_in: int, n_out: int):
    m = luabridge.nn.Linear(n_in, n_out)
    return m, np.array(m.weight, dtype=np.float64), np.array(m.bias, dtype=np.float64)


def test_forward_takes_a_torch_tensor_and_returns_a_lua_tensor_proxy() -> None:
    m, w, b = _linear(3, 2)
    x = torch.randn(4, 3, dtype=torch.float64)
    out = m.forward(x)
    assert isinstance(out, luabridge.Tensor)
    np.testing.assert_allclose(np.asarray(out), x.numpy() @ w.T + b, rtol=1e-12)


def test_the_lua_tensor_is_the_torch_memory() -> None:
    x = torch.zeros(2, 5, dtype=torch.float64)
    lua_x = luabridge.unwrap(x)
    assert luabridge.to_numpy(lua_x).ctypes.data == x.data_ptr()
    FILL(x, 7.5)
    assert torch.equal(x, torch.full((2, 5), 7.5, dtype=torch.float64))
    luabridge.nn.MulConstant(2, True).forward(x)  # in place: writes into x
    assert torch.equal(x, torch.full((2, 5), 15.0, dtype=torch.float64))


@pytest.mark.parametrize("make", [
    lambda: torch.arange(12.0, dtype=torch.float64).reshape(3, 4).t(),        # transposed
    lambda: torch.arange(40.0, dtype=torch.float64).reshape(5, 8)[1:5:2, 2:5],  # offset and steps
    lambda: torch.arange(3.0, dtype=torch.float64).reshape(3, 1).expand(3, 4),  # stride 0
])
def test_non_contiguous_tensors_keep_their_strides(make) -> None:
    x = make()
    assert not x.is_contiguous()
    n_in = x.shape[1]
    m, w, b = _linear(n_in, 2)
    np.testing.assert_allclose(np.asarray(m.forward(x)), x.numpy() @ w.T + b, rtol=1e-12)
    assert SUM(x) == pytest.approx(float(x.numpy().sum()), rel=1e-12)


def test_lua_writes_through_a_view_land_in_the_right_places() -> None:
    base = torch.zeros(4, 6, dtype=torch.float64)
    FILL(base[1:3, ::2], 1.0)
    expected = np.zeros((4, 6))
    expected[1:3, ::2] = 1.0
    np.testing.assert_array_equal(base.numpy(), expected)


@pytest.mark.parametrize("dtype, lua_type", [
    (torch.float32, "torch.FloatTensor"), (torch.float64, "torch.DoubleTensor"),
    (torch.int64, "torch.LongTensor"), (torch.int32, "torch.IntTensor"),
    (torch.int16, "torch.ShortTensor"), (torch.int8, "torch.CharTensor"),
    (torch.uint8, "torch.ByteTensor"), (torch.float16, "torch.HalfTensor"),
])
def test_dtypes_map_to_torch7_tensor_types(dtype, lua_type: str) -> None:
    x = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=dtype)
    assert TYPE_OF(x) == lua_type
    assert lua_function("function(t) return t:double():sum() end")(x) == 21


def test_a_tensor_that_requires_grad_is_a_clear_error() -> None:
    x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    m = luabridge.nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"requires grad .*x\.detach\(\)"):
        m.forward(x)
    assert m.forward(x.detach()).shape == (2, 2)


def test_lua_keeps_the_memory_alive_after_torch_lets_go() -> None:
    keep = lua_function("function(t) kept_from_torch = t end")
    keep(torch.arange(5.0, dtype=torch.float64) * 2)   # a temporary: only Lua holds it now
    gc.collect()
    assert luabridge.eval("kept_from_torch:sum()") == 20.0
    luabridge.execute("kept_from_torch = nil")


def test_tensors_inside_tables_are_shared_too() -> None:
    a, b = torch.ones(3, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64)
    out = luabridge.nn.CAddTable().forward([a, b])
    np.testing.assert_array_equal(np.asarray(out), [3.0, 3.0, 3.0])
    lua_function("function(t) t[2]:zero() end")([a, b])
    assert torch.equal(b, torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("dtype, words", [(torch.bfloat16, "bfloat16 cannot be shared"),
                                          (torch.bool, "bool arrays are not shared"),
                                          (torch.complex64, "unsupported dtype complex64")])
def test_dtypes_without_a_torch7_type_are_clear_errors(dtype, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        luabridge.nn.Identity().forward(torch.ones(2, dtype=dtype))
