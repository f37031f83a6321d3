"""Arrays that are not numpy's passed to proxies: any DLPack producer or object with
__array_interface__ becomes a Lua tensor over its memory, with no array library imported."""
import subprocess
import sys

import numpy as np
import pytest

import luabridge


class DLPackOnly:
    """An array known to Python only through the DLPack protocol (as a PyTorch or JAX array)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class InterfaceOnly:
    """An array known only by __array_interface__ (the buffer's address, shape and strides)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a
        self.__array_interface__ = a.__array_interface__


@pytest.mark.parametrize("kind", [DLPackOnly, InterfaceOnly])
def test_proxies_share_the_memory_of_array_likes(kind) -> None:
    a = np.arange(12.0).reshape(3, 4)[:, 1:3]     # strided, with an offset
    fill = luabridge.wrap(luabridge.eval("function(t, v) t:fill(v) return t:sum() end"))
    assert fill(kind(a), 2.0) == 12.0
    expected = np.arange(12.0).reshape(3, 4)
    expected[:, 1:3] = 2.0
    np.testing.assert_array_equal(a.base.reshape(3, 4), expected)


def test_a_read_only_interface_is_refused_as_numpy_arrays_are() -> None:
    a = np.ones(3)
    a.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        luabridge.nn.Identity().forward(InterfaceOnly(a))


def test_sharing_imports_no_array_library() -> None:
    code = ("import sys, numpy as np, luabridge\n"
            "class P:\n"
            "    def __init__(self, a): self.a = a\n"
            "    def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)\n"
            "    def __dlpack_device__(self): return self.a.__dlpack_device__()\n"
            "out = luabridge.nn.Linear(3, 2).forward(P(np.ones((4, 3))))\n"
            "print(tuple(out.shape), [m for m in ('torch', 'jax', 'cupy') if m in sys.modules])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["(4,", "2)", "[]"]
