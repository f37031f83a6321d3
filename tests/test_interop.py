import gc

import numpy as np
import pytest

import luabridge
from luabridge.core.runtime import STRING_ENCODING

from helpers import lua_fn as L

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64, np.float16]


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_numpy_shares_memory_any_strides(lua, dtype, rng):
    base = (rng.standard_normal((5, 6, 4)) * 20).astype(dtype)
    for arr in (base, base[1:4, ::2, 1:], base[::-1, :, ::-2], base.transpose(2, 0, 1)):
        t = luabridge.from_numpy(arr)
        back = luabridge.to_numpy(t)
        np.testing.assert_array_equal(back, arr)
        assert np.shares_memory(back, arr)
        proxy = luabridge.wrap(t)
        assert list(proxy.size()) == list(arr.shape)


def test_zero_dim_array_is_a_one_element_tensor_on_its_memory(lua):
    # torch7 has no 0-d tensors: a numpy scalar array is shared as a 1-element tensor
    arr = np.array(3.5)
    proxy = luabridge.wrap(luabridge.from_numpy(arr))
    assert list(proxy.size()) == [1]
    proxy.fill(-2)
    assert arr == -2.0
    assert luabridge.nn.Identity().forward(np.array(4.0)).sum() == 4.0


def test_writes_are_seen_by_both_sides(lua):
    arr = np.zeros((3, 4), dtype=np.float64)
    t = luabridge.from_numpy(arr[:, 1:3])
    luabridge.runtime().globals().torch.Tensor.fill(t, 7)
    expected = np.zeros((3, 4))
    expected[:, 1:3] = 7
    np.testing.assert_array_equal(arr, expected)
    arr[0, 1] = -1
    assert luabridge.eval("function(t) return t[1][1] end")(t) == -1


def test_lifetime_either_side_first(lua):
    t = luabridge.execute("local t = torch.FloatTensor(1000):fill(3); return t")
    view = luabridge.to_numpy(t)
    del t
    luabridge.execute("collectgarbage(); collectgarbage()")
    gc.collect()
    luabridge.execute("torch.FloatTensor(10)")  # flushes released buffers
    assert view.sum() == 3000

    arr = np.arange(10.0)
    t = luabridge.from_numpy(arr)
    del arr
    gc.collect()
    keep = luabridge.eval("function(t) _G.__kept = t end")
    keep(t)
    del t
    gc.collect()
    assert luabridge.eval("__kept[10]") == 9
    luabridge.execute("__kept = nil")


def test_array_interface_and_dlpack(lua):
    t = luabridge.wrap(luabridge.execute("return torch.DoubleTensor({{1, 2}, {3, 4}}):t()"))
    a = np.asarray(t)
    np.testing.assert_array_equal(a, [[1, 3], [2, 4]])
    d = np.from_dlpack(t)
    assert np.shares_memory(a, d)
    back = luabridge.from_dlpack(d)
    np.testing.assert_array_equal(luabridge.to_numpy(back), [[1, 3], [2, 4]])


def test_bad_arrays_are_refused(lua):
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        luabridge.from_numpy(ro)
    with pytest.raises(TypeError, match="bool"):
        luabridge.from_numpy(np.zeros(3, dtype=bool))
    with pytest.raises(TypeError, match="unsupported dtype"):
        luabridge.from_numpy(np.zeros(3, dtype=np.complex64))
    with pytest.raises(TypeError, match="unsupported dtype"):
        luabridge.from_numpy(np.zeros(3, dtype=">f8"))


def test_released_buffers_are_reused_only_when_unreferenced(lua):
    from luabridge.core.runtime import bridge

    luabridge.execute("for _ = 1, 3 do collectgarbage() end; torch.FloatTensor(1)")
    before = len(bridge().buffers)
    make = luabridge.eval("function(v) return torch.DoubleTensor(262144):fill(v) end")  # 2 MiB
    view = luabridge.to_numpy(make(1))  # the Lua tensor is garbage at once, the view holds the buffer
    for v in range(2, 40):               # 76 MiB of new buffers: the collector runs, buffers recycle
        t = make(v)
        assert luabridge.to_numpy(t)[0] == v
        del t
    assert (view == 1).all()
    assert len(bridge().buffers) < before + 40


def test_dead_tensors_do_not_pile_up(lua):
    from luabridge.core.runtime import bridge

    luabridge.execute("for _ = 1, 3 do collectgarbage() end; torch.FloatTensor(1)")
    before = len(bridge().buffers)
    make = luabridge.eval("function() return torch.FloatTensor(1048576):fill(2) end")  # 4 MiB
    for _ in range(100):
        assert luabridge.to_numpy(make())[7] == 2
    assert len(bridge().buffers) < before + 40


def test_shared_arrays_count_toward_the_collector(lua):
    from luabridge.core.runtime import bridge

    luabridge.execute("for _ = 1, 3 do collectgarbage() end; torch.FloatTensor(1)")
    before = len(bridge().buffers)
    norm = luabridge.eval("function(t) return t:norm() end")    # allocates no tensor in Lua
    rng = np.random.default_rng(0)
    for _ in range(300):                 # 300 arrays of 512 KiB, past the collector's 64 MiB
        x = rng.standard_normal(65536)
        assert norm(luabridge.from_numpy(x)) == pytest.approx(np.sqrt((x * x).sum()))
    assert len(bridge().buffers) - before < 200   # uncounted, all 300 stayed registered


@pytest.mark.parametrize("dtype,bits", [
    (np.float64, np.uint64(0xFFFA000000001234)),
    (np.float32, np.uint32(0xFFFF1234)),
    (np.float16, np.uint16(0xFFF3)),
])
def test_nan_payloads_reach_lua_as_numbers(dtype, bits):
    # NaNs with arbitrary payload bits (as files or other programs may hold) must not reach
    # LuaJIT as tagged values: they read back as ordinary NaNs.
    raw = np.array([bits, 0, bits], dtype=type(bits))
    arr = raw.view(dtype)
    arr[1] = 2.5
    t = luabridge.from_numpy(arr)
    probe = luabridge.eval("""function(t)
      local v = t[1]
      local whole = t:type() == 'torch.HalfTensor' and 0 / 0 or t:max()
      return type(v), v ~= v, t[2], type(whole), whole ~= whole
    end""")
    assert probe(t) == ("number", True, 2.5, "number", True)
    assert np.isnan(arr[0]) and np.isnan(arr[2]) and arr[1] == 2.5


def test_arrays_without_nans_are_untouched_bit_for_bit():
    arr = np.array([0.0, -0.0, np.inf, -np.inf, 5e-324], dtype=np.float64)
    before = arr.view(np.uint64).copy()
    luabridge.from_numpy(arr)
    assert (arr.view(np.uint64) == before).all()


ELEMENT_FACTS = L("""function(name)
  local dt = require('torch.core.dtype')[name]
  local f = torch.MemoryFile():binary()
  f['write' .. name](f, torch[name .. 'Tensor']({ 1, 2, 3 }):storage())
  local t = torch.getmetatable('torch.' .. dt.cuda .. 'Tensor')
  return dt.size, dt.integer, dt.min or false, dt.max or false, torch[name .. 'Tensor'](3),
         f:storage():string():sub(1, 3 * dt.size), t ~= nil and t.__typename or false
end""")


def test_element_types_agree_across_layers(lua):
    """Every layer reads one table (lua/torch/elementtypes.lua): what each Lua layer says of a type
    agrees with numpy's facts about the dtype Python derived from the same table."""
    from luabridge import t7
    from luabridge.core.dtypes import CUDA_NAMES, DTYPES

    assert list(DTYPES) == ["Byte", "Char", "Short", "Int", "Long", "Float", "Double", "Half"]
    for name, dtype in DTYPES.items():
        size, integer, lo, hi, tensor, file_bytes, cuda_type = ELEMENT_FACTS(name)
        assert size == dtype.itemsize
        assert integer == (dtype.kind in "iu")
        if name not in ("Long", "Float", "Double", "Half"):   # ranges a double holds exactly
            assert (lo, hi) == (np.iinfo(dtype).min, np.iinfo(dtype).max)
        assert luabridge.to_numpy(tensor).dtype == dtype
        assert file_bytes.encode(STRING_ENCODING) == np.array([1, 2, 3], dtype.newbyteorder("<")).tobytes()
        assert cuda_type == f"torch.{CUDA_NAMES[name]}Tensor"
        assert t7.TENSOR_CLASSES[cuda_type] == t7.TENSOR_CLASSES[f"torch.{name}Tensor"] == dtype


class _Recording:
    """A device provider that records which of its parts served a call (wrapping another)."""

    def __init__(self, inner, seen: list) -> None:
        self.inner, self.seen, self.dlpack_types = inner, seen, inner.dlpack_types

    def __getattr__(self, name):
        def part(*args):
            self.seen.append(name)
            return getattr(self.inner, name)(*args)
        return part


class _OnDevice:
    """A DLPack producer on another device (type code `kind`) over a numpy array."""

    def __init__(self, a: np.ndarray, kind: int) -> None:
        self.a, self.kind = a, kind

    def __dlpack_device__(self):
        return (self.kind, 0)


def test_interop_and_proxies_reach_a_device_through_its_provider(lua, monkeypatch):
    """to_numpy, from_dlpack and the tensor proxy's array protocols take the provider of the
    tensor's device from one table (interop.DEVICES), for CPU and CUDA tensors alike."""
    from luabridge.core import interop
    from luabridge.providers.torch_cuda import arrays as cuda

    cuda.use_array_module(np)   # numpy stands in for CuPy
    try:
        seen = {"cpu": [], "cuda": []}
        for device in seen:
            monkeypatch.setitem(interop.DEVICES, device, _Recording(interop.DEVICES[device], seen[device]))
        values = np.array([[1.5, -2.0], [3.0, 4.25]])
        for type_name, device in (("torch.DoubleTensor", "cpu"), ("torch.CudaDoubleTensor", "cuda")):
            t = luabridge.wrap(L("function(a, ty) return a:type(ty) end")(values, type_name))
            np.testing.assert_array_equal(t.__array__(), values)
            np.testing.assert_array_equal(np.asarray(t), values)
            assert t.shape == (2, 2) and t[1, 1] == 4.25
            assert t.__dlpack_device__() == (1, 0)   # numpy's view, also on the stand-in device
            assert set(seen[device]) == {"view", "to_host"}
            assert seen["cuda" if device == "cpu" else "cpu"] == []
            seen[device].clear()
        shared = interop.from_dlpack(np.arange(3.0))
        assert seen["cpu"][-1] == "share" and list(luabridge.wrap(shared).size()) == [3]
    finally:
        cuda.use_array_module(None)
    with pytest.raises(TypeError, match="DLPack device type 10"):
        interop.from_dlpack(_OnDevice(np.zeros(2), 10))
