"""DLPack and zero-copy exchange of CUDA tensors with the array module, CuPy and PyTorch CUDA:
memory is shared both ways (a write on one side is seen on the other), and arrays made on a
non-default stream arrive complete. The CuPy and PyTorch tests need a device; with numpy standing
in they skip, saying so."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from gpu_mode import MODE, NEEDS_DEVICE, XP
from helpers import lua_fn as L
from luabridge.providers.torch_cuda import arrays as cuda


def _torch_cuda():
    try:
        import torch
    except ImportError:
        pytest.skip(f"PyTorch is not installed ({MODE})")
    if not torch.cuda.is_available():
        pytest.skip(f"PyTorch {torch.__version__} has no CUDA device ({MODE})")
    return torch


def test_device_arrays_are_shared_both_ways():
    a = XP.arange(12, dtype=XP.float32).reshape(3, 4)
    t = cuda.from_device_array(a[:, 1:3])                  # a strided view, no copy
    L("function(t) t:mul(10) end")(t)
    np.testing.assert_array_equal(cuda.to_host(a)[:, 1:3], np.arange(12).reshape(3, 4)[:, 1:3] * 10)
    back = XP.from_dlpack(luabridge.wrap(t))               # DLPack out of the proxy: the same memory
    back[0, 0] = -1
    assert L("function(t) return t[1][1] end")(t) == -1
    assert luabridge.wrap(t).__dlpack_device__()[0] == (2 if XP is not np else 1)


@NEEDS_DEVICE
def test_cupy_dlpack_zero_copy_and_streams():
    import cupy
    a = cupy.ones((256, 256), dtype=cupy.float32)
    with cupy.cuda.Stream(non_blocking=True):
        b = a @ a                                          # queued on the side stream
        t = luabridge.from_dlpack(b)
        assert L("function(t) return torch.type(t) end")(t) == "torch.CudaTensor"
        total = L("function(t) return t:sum() end")(t)
    assert total == pytest.approx(256.0 ** 3)
    L("function(t) t:fill(2) end")(t)
    assert float(b.sum()) == 2 * 256 * 256                 # the Lua fill wrote b's memory
    view = cupy.from_dlpack(luabridge.wrap(t))
    assert view.data.ptr == b.data.ptr


@NEEDS_DEVICE
def test_pytorch_cuda_dlpack_zero_copy_and_streams():
    torch = _torch_cuda()
    x = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = x * 3                                          # made on a side stream
    t = luabridge.from_dlpack(y)
    np.testing.assert_array_equal(cuda.to_host(luabridge.to_numpy(t)), np.arange(6).reshape(2, 3) * 3)
    L("function(t) t:add(1) end")(t)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), torch.arange(6.0).reshape(2, 3) * 3 + 1)
    back = torch.from_dlpack(luabridge.wrap(t))
    assert back.data_ptr() == y.data_ptr() and back.device.type == "cuda"
