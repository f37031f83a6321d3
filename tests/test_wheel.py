"""The built wheel carries the Lua sources: `require 'torch'` works from an installed copy.

Slow (builds a wheel and a fresh venv, ~10 s once per session) but part of `make test`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# what a source checkout holds that is not source (the copy that gets built leaves these out)
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                    "*.pyc", ".pytest_cache", ".hypothesis")


def run(cmd: list[str], cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """Runs cmd with no variable that could point Python or Lua back at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LUA_PATH")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"{r.args}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel . --no-deps` on a copy of the sources (keeps build/ out of the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE, symlinks=True)
    ok(run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(base / "dist")], src))
    (found,) = (base / "dist").glob("luabridge-*.whl")
    return found


@pytest.fixture(scope="session")
def venv_python(wheel, tmp_path_factory) -> Path:
    """A fresh venv (no system site-packages) holding lupa, numpy and the wheel."""
    home = tmp_path_factory.mktemp("venv")
    ok(run([sys.executable, "-m", "venv", "--without-pip", str(home / "v")], home))
    py = home / "v" / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--disable-pip-version-check"]
    deps = [f"{name}=={metadata.version(name)}" for name in ("lupa", "numpy")]
    r = run([*pip, *deps], home, timeout=300)
    if r.returncode != 0:
        pytest.skip(f"cannot install {deps} into a fresh venv (no cache or index?): {r.stderr[-500:]}")
    ok(run([*pip, "--no-deps", "--no-index", str(wheel)], home))
    return py


def test_wheel_ships_every_lua_file(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    expected = {"luabridge/lua/" + p.relative_to(ROOT / "lua").as_posix()
                for p in (ROOT / "lua").rglob("*.lua")}
    assert expected, "no Lua sources found in the checkout"
    assert expected <= names, sorted(expected - names)
    assert "luabridge/__init__.py" in names and "luabridge/cli.py" in names


def test_require_torch_from_installed_package(venv_python, tmp_path):
    code = (
        "import sys, luabridge\n"
        "assert sys.prefix != sys.base_prefix\n"
        "print(luabridge.__file__)\n"
        "print(luabridge.lua_dir())\n"
        "luabridge.require('torch')\n"
        "print(luabridge.eval(\"tostring(torch.Tensor({{1, 2}, {3, 4}}):t())\"), end='')\n"
    )
    r = ok(run([str(venv_python), "-c", code], tmp_path))
    module_file, lua_dir, *printed = r.stdout.splitlines()
    site = Path(venv_python).parent.parent
    assert Path(module_file).is_relative_to(site), module_file
    assert Path(lua_dir) == Path(module_file).parent / "lua"
    assert not Path(lua_dir).is_relative_to(ROOT)
    assert printed == [" 1  3", " 2  4", "[torch.DoubleTensor of size 2x2]"]


def test_installed_console_script(venv_python, tmp_path):
    script = Path(venv_python).parent / "luabridge"
    r = ok(run([str(script), "th", "-e", "print(torch.FloatTensor(3):fill(2):narrow(1, 2, 2))"], tmp_path))
    assert r.stdout == " 2\n 2\n[torch.FloatTensor of size 2]\n\n"


def test_installed_venv_cannot_see_the_checkout(venv_python, tmp_path):
    # guards the test above: without system site-packages the checkout's venv is out of reach
    r = run([str(venv_python), "-c", "import pytest"], tmp_path)
    assert r.returncode != 0
