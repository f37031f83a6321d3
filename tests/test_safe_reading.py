"""One safe reading path: every way a .t7 file (or its bytes) enters luabridge refuses the Lua
functions it holds unless the caller opts in (functions='load', or 'skip' to read them as nil).

The hostile file is an nn.Linear whose updateOutput was replaced by a Lua function and saved: had
it been loaded and run, the function would write a marker file, so each test checks both the error
and that no code of the file ran. With functions='skip' the module runs its class's updateOutput,
checked against numpy float64."""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import luabridge
from helpers import in_fresh_thread, lua_fn
from luabridge import LuaError, Model
from luabridge.th.cli import main as cli_main

HOSTILE = lua_fn("""function(path, marker)
  require 'nn'
  torch.manualSeed(5)
  local m = nn.Linear(3, 2):double()
  m.updateOutput = function(self, x)
    local f = io.open(marker, 'w'); f:write('ran'); f:close()
    return nn.Linear.updateOutput(self, x)
  end
  torch.save(path, m)
end""")

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]])


class Hostile:
    def __init__(self, folder: Path) -> None:
        self.path, self.marker = folder / "fn.t7", folder / "ran"
        HOSTILE(str(self.path), str(self.marker))

    def bytes(self) -> bytes:
        return self.path.read_bytes()

    def ran(self) -> bool:
        return self.marker.exists()


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return Hostile(tmp_path)


def refuses(hostile: Hostile, read: Callable[[], Any]) -> None:
    with pytest.raises(LuaError, match=r"updateOutput is a Lua function .*not loaded"):
        read()
    assert not hostile.ran()


def test_lua_torch_load(hostile):
    refuses(hostile, lambda: lua_fn("function(p) return torch.load(p) end")(str(hostile.path)))


def test_luabridge_load(hostile):
    refuses(hostile, lambda: luabridge.load(hostile.path))


def test_model_from_t7_path(hostile):
    refuses(hostile, lambda: Model.from_t7(hostile.path).predict(X))


def test_model_from_bytes(hostile):
    refuses(hostile, lambda: Model(hostile.bytes()).predict(X))


def test_model_unpickled_in_another_runtime(hostile):
    model = pickle.loads(pickle.dumps(Model.from_t7(hostile.bytes())))
    refuses(hostile, lambda: in_fresh_thread(lambda: model.predict(X)))


def test_ray_predictor_in_a_fresh_runtime(hostile):
    pytest.importorskip("ray", reason="Ray is missing (pip install 'luabridge[ray]')")
    from luabridge.ray import Predictor

    predictor = Predictor(pickle.loads(pickle.dumps(Model(hostile.bytes()))))
    refuses(hostile, lambda: in_fresh_thread(lambda: predictor({"input": X})))


def test_load_lua(hostile):
    pytest.importorskip("torch", reason="PyTorch is missing (pip install 'luabridge[torch]')")
    from luabridge.torch import load_lua

    refuses(hostile, lambda: load_lua(hostile.path))


def test_lua_module_unpickling(hostile):
    """A pickle whose LuaModule bytes hold a function, as a hostile pickle would carry them."""
    pytest.importorskip("torch", reason="PyTorch is missing (pip install 'luabridge[torch]')")
    from luabridge.torch import LuaModule

    _unpickle, (data, training) = LuaModule("nn.Linear(3, 2)").__reduce__()
    assert pickle.loads(pickle.dumps(_unpickle(data, training))).lua._typename() == "nn.Linear"

    class Carrier:
        def __reduce__(self) -> tuple:
            return _unpickle, (hostile.bytes(), False)

    refuses(hostile, lambda: pickle.loads(pickle.dumps(Carrier())))


def test_cli_convert_refuses_and_writes_nothing(hostile, tmp_path, capsys):
    pytest.importorskip("torch", reason="PyTorch is missing (pip install 'luabridge[torch]')")
    out = tmp_path / "out.pt"
    assert cli_main(["convert", str(hostile.path), str(out)]) == 1
    assert "updateOutput is a Lua function" in capsys.readouterr().err
    assert not out.exists() and not hostile.ran()


def test_cli_info_runs_nothing(hostile, capsys):
    cli_main(["info", str(hostile.path)])
    assert "Traceback" not in capsys.readouterr().err
    assert not hostile.ran()


def test_skip_reads_functions_as_nil_and_the_class_method_runs(hostile):
    linear = luabridge.load(hostile.path, functions="skip")
    w, b = linear.weight.numpy(), linear.bias.numpy()
    np.testing.assert_allclose(Model.from_t7(hostile.path, functions="skip").predict(X), X @ w.T + b, rtol=1e-12)
    assert not hostile.ran()


@pytest.mark.parametrize("entry", ["luabridge.load", "Model.from_t7"])
def test_load_opts_in_and_runs_the_files_code(hostile, entry):
    if entry == "luabridge.load":
        luabridge.load(hostile.path, functions="load").forward(X)
    else:
        Model.from_t7(hostile.path, functions="load").predict(X)
    assert hostile.ran()


def test_models_made_from_own_code_keep_their_functions():
    """from_lua's bytes are this process's own serialization: a function field the source set
    survives a round trip to another runtime."""
    model = Model.from_lua("""
      local m = nn.Linear(3, 2):double()
      m.scale = function(v) return 2 * v end
      return m""")
    call_scale = lua_fn("function(m) return m.scale(21) end")
    assert in_fresh_thread(lambda: call_scale(model.module()._lua)) == 42
