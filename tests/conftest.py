import numpy as np
import pytest

import luabridge
from processes import no_leaked_children, pytest_sessionfinish, pytest_sessionstart, spawn  # noqa: F401 - fixtures and hooks


@pytest.fixture(scope="session")
def lua():
    """This thread's runtime with torch loaded: lua.eval / lua.execute return Lua values."""
    luabridge.require("torch")
    return luabridge


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(params=["lua", "numpy"])
def path(request, lua):
    """Runs an elementwise test on the LuaJIT kernels only, then with numpy's loops for every size."""
    limits = lua.eval("package.loaded['torch.backend.cpu.pointwise'].numpyFrom")
    saved = {k: (v.Float, v.Double) for k, v in limits.items()}
    for v in limits.values():
        v.Float = v.Double = (1e18 if request.param == "lua" else 0)
    yield request.param
    for k, (f, d) in saved.items():
        limits[k].Float, limits[k].Double = f, d


@pytest.fixture
def numpy_device(lua):
    """The CUDA backend with numpy standing in for CuPy, for this test."""
    from luabridge.providers.torch_cuda import arrays as cuda
    cuda.use_array_module(np)
    yield
    cuda.use_array_module(None)
