import numpy as np
import pytest

import luabridge


@pytest.fixture(scope="session")
def lua():
    """This thread's runtime with torch loaded: lua.eval / lua.execute return Lua values."""
    luabridge.require("torch")
    return luabridge


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
