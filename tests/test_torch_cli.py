"""`luabridge convert MODEL.t7 OUT.pt` in a subprocess: the saved PyTorch module (a Sequential and
an nngraph gModule written by luabridge) gives the Lua module's outputs, also with modules kept in Lua
(--no-strict); the errors (not a module, no PyTorch counterpart, PyTorch missing) exit non-zero with a
clear message."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge convert needs it")

import numpy as np  # noqa: E402

import luabridge  # noqa: E402


def convert(*args: str | Path, python: str = "") -> subprocess.CompletedProcess:
    """luabridge convert ARGS in a fresh Python (`python`: statements run before the command)."""
    code = f"import sys\n{python}\nfrom luabridge.th.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "convert", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("constructor", [
    "nn.Sequential():add(nn.Linear(4, 5)):add(nn.Tanh()):add(nn.Linear(5, 2))",
    """(function()
         local x, h = nn.Identity()(), nn.Identity()()
         local z = nn.CAddTable()({nn.Linear(4, 5)(x), nn.Linear(5, 5)(h)})
         return nn.gModule({x, h}, {nn.Tanh()(z), nn.Sigmoid()(z)})
       end)()"""])
def test_converted_file_gives_the_lua_outputs(tmp_path, constructor):
    luabridge.require("nngraph")
    model = luabridge.wrap(luabridge.eval(constructor))
    luabridge.save(tmp_path / "model.t7", model)
    r = convert(tmp_path / "model.t7", tmp_path / "model.pt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{tmp_path / 'model.pt'}: ")
    module = torch.load(tmp_path / "model.pt", weights_only=False)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4))
    if isinstance(module, torch.fx.GraphModule):
        h = rng.standard_normal((3, 5))
        want = [np.array(y) for y in model.forward([x, h])]
        got = module([torch.from_numpy(x), torch.from_numpy(h)])
    else:
        want, got = [np.array(model.forward(x))], [module(torch.from_numpy(x))]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.detach().numpy(), w, rtol=0, atol=1e-10)


def test_a_file_that_is_not_a_module(tmp_path):
    luabridge.save(tmp_path / "data.t7", {"weights": np.zeros(3)})
    r = convert(tmp_path / "data.t7", tmp_path / "out.pt")
    assert r.returncode == 1
    assert "data.t7 holds a dict, not an nn module" in r.stderr
    r = convert(tmp_path / "absent.t7", tmp_path / "out.pt")
    assert r.returncode == 1 and "no such file" in r.stderr


def test_no_pytorch_counterpart(tmp_path):
    luabridge.require("nn")
    luabridge.save(tmp_path / "m.t7", luabridge.eval("nn.Sequential():add(nn.Linear(3, 4)):add(nn.Euclidean(4, 2))"))
    r = convert(tmp_path / "m.t7", tmp_path / "m.pt")
    assert r.returncode == 1
    assert "nn.Euclidean at 2 has no PyTorch counterpart" in r.stderr
    assert not (tmp_path / "m.pt").exists()
    r = convert(tmp_path / "m.t7", tmp_path / "m.pt", "--no-strict")
    assert r.returncode == 0, r.stderr
    module = torch.load(tmp_path / "m.pt", weights_only=False)   # Euclidean stays a LuaModule
    from luabridge.torch import LuaModule
    assert isinstance(module[0], torch.nn.Linear) and isinstance(module[1], LuaModule)
    lua = luabridge.load(tmp_path / "m.t7")
    x = np.random.default_rng(0).standard_normal((5, 3))
    h = x @ np.array(lua.get(1).weight).T + np.array(lua.get(1).bias)
    centres = np.array(lua.get(2).weight)   # Euclidean: y_j = || h - w[:, j] ||
    want = np.linalg.norm(h[:, :, None] - centres[None], axis=1)
    got = module(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


def test_pytorch_missing_and_help(tmp_path):
    r = convert(tmp_path / "m.t7", tmp_path / "m.pt", python="sys.modules['torch'] = None")
    assert r.returncode == 1
    assert "needs PyTorch" in r.stderr and "pip install 'luabridge[torch]'" in r.stderr
    r = convert("--help")
    assert r.returncode == 0 and "weights_only=False" in r.stdout
