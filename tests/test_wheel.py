"""Packaging: `python -m build` makes an sdist that carries the Lua sources and a wheel built from
that sdist, holding luabridge's own LuaJIT module with LUA52COMPAT; each installs into a fresh venv
where `require 'torch'`, the console script and the flag work.

Slow (two builds and two fresh venvs, ~30 s once per session) but part of `make test`.
"""
from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import luabridge

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# what a source checkout holds that is not source (the copy that gets built leaves these out)
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                    "*.pyc", ".pytest_cache", ".hypothesis")


def run(cmd: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs cmd with no variable that could point Python or Lua back at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LUA_PATH")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"{r.args}\n{r.stdout}\n{r.stderr}"
    return r


def source_files(src: Path, folder: str, pattern: str) -> set[str]:
    return {p.relative_to(src).as_posix() for p in (src / folder).rglob(pattern)}


@pytest.fixture(scope="session")
def dists(tmp_path_factory) -> dict[str, Path]:
    """`python -m build` on a copy of the sources ("src", kept out of the checkout, which others
    may be editing): build makes the sdist, unpacks it and builds the wheel from it, so the wheel
    proves the sdist complete."""
    base = tmp_path_factory.mktemp("dist")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE, symlinks=True)
    ok(run([sys.executable, "-m", "build", "--outdir", str(base / "out"), "."], src))
    (sdist,) = (base / "out").glob("luabridge-*.tar.gz")
    (wheel,) = (base / "out").glob("luabridge-*.whl")
    return {"src": src, "sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="session", params=["wheel", "sdist"])
def venv_python(request, dists, tmp_path_factory) -> Path:
    """A fresh venv (no system site-packages) holding lupa, numpy and luabridge installed from the
    wheel, or from the sdist (which pip builds itself)."""
    home = tmp_path_factory.mktemp(f"venv-{request.param}")
    ok(run([sys.executable, "-m", "venv", "--without-pip", str(home / "v")], home))
    py = home / "v" / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--disable-pip-version-check"]
    # the releases installed here, without a local part (a lupa rebuilt as 2.8+lua52compat is 2.8)
    deps = [f"{name}=={metadata.version(name).split('+')[0]}" for name in ("lupa", "numpy")]
    r = run([*pip, *deps], home)
    if r.returncode != 0:
        pytest.skip(f"cannot install {deps} into a fresh venv (no cache or index?): {r.stderr[-500:]}")
    ok(run([*pip, "--no-deps", str(dists[request.param])], home))
    return py


def test_sdist_holds_the_package_and_not_the_tests(dists):
    with tarfile.open(dists["sdist"]) as tar:
        top = f"luabridge-{luabridge.__version__}/"
        names = {n.removeprefix(top) for n in tar.getnames()}
    src = dists["src"]
    expected = (source_files(src, "lua", "*.lua") | source_files(src, "luabridge", "*.py")
                | {"luabridge/py.typed", "LICENSE", "README.md", "pyproject.toml", "setup.py"})
    assert len(expected) > 100
    assert expected <= names, sorted(expected - names)
    assert not {n for n in names if n.startswith("tests/")}


def test_wheel_ships_every_lua_file(dists):
    with zipfile.ZipFile(dists["wheel"]) as z:
        names = set(z.namelist())
        wheel_info = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    src = dists["src"]
    expected = ({"luabridge/" + name for name in source_files(src, "lua", "*.lua")}
                | source_files(src, "luabridge", "*.py"))
    assert expected, "no Lua sources found in the checkout"
    assert expected <= names, sorted(expected - names)
    assert "luabridge/py.typed" in names
    # luabridge's own LuaJIT module, built with LUA52COMPAT (setup.py): the wheel is this platform's
    assert [n for n in names if n.startswith("luabridge/_luajit21.") and n.endswith(".so")], sorted(names)[:20]
    assert "Root-Is-Purelib: false" in wheel_info


def test_wheel_metadata(dists):
    """One version (luabridge.__version__), an SPDX license with its file, no license classifier."""
    with zipfile.ZipFile(dists["wheel"]) as z:
        info = f"luabridge-{luabridge.__version__}.dist-info/"
        meta = email.message_from_bytes(z.read(info + "METADATA"))
        license_text = z.read(info + "licenses/LICENSE").decode()
    assert meta["Version"] == luabridge.__version__
    assert meta["License-Expression"] == "MIT"
    assert meta["License-File"] == "LICENSE"
    assert license_text == (dists["src"] / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "the luabridge authors" in license_text
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]
    runtime_deps = [d for d in meta.get_all("Requires-Dist") if "extra ==" not in d]
    assert sorted(runtime_deps) == ["lupa>=2.2", "numpy>=1.24",
                                    "onednn-cpu-gomp>=2023.2; platform_system == \"Linux\" and platform_machine == \"x86_64\""]


def test_require_torch_from_installed_package(venv_python, tmp_path):
    code = (
        "import sys, luabridge\n"
        "from importlib import metadata\n"
        "assert sys.prefix != sys.base_prefix\n"
        "assert metadata.version('luabridge') == luabridge.__version__, metadata.version('luabridge')\n"
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
    assert (Path(lua_dir) / "torch" / "init.lua").is_file()
    assert (Path(module_file).parent / "py.typed").is_file()
    assert printed == [" 1  3", " 2  4", "[torch.DoubleTensor of size 2x2]"]


def test_installed_console_script(venv_python, tmp_path):
    script = Path(venv_python).parent / "luabridge"
    r = ok(run([str(script), "th", "-e", "print(torch.FloatTensor(3):fill(2):narrow(1, 2, 2))"], tmp_path))
    assert r.stdout == " 2\n 2\n[torch.FloatTensor of size 2]\n\n"


def test_installed_package_runs_the_lua52compat_luajit(venv_python, tmp_path):
    """Installed from the wheel or built from the sdist, luabridge runs its own LuaJIT with
    LUA52COMPAT: `#` of a table calls __len, a call's `(` may open a new line, pairs honours __pairs."""
    script = Path(venv_python).parent / "luabridge"
    code = ("local t = setmetatable({}, {__len = function() return 3 end,\n"
            "  __pairs = function() return next, {k = 'v'}, nil end})\n"
            "for k, v in pairs(t) do io.write(k, v, ' ') end\n"
            "print\n(#t)")
    r = ok(run([str(script), "th", "-e", code], tmp_path))
    assert r.stdout == "kv 3\n"
    r = ok(run([str(venv_python), "-c", "import luabridge; print(luabridge.LUA52COMPAT)"], tmp_path))
    assert r.stdout == "True\n" and "LUA52COMPAT" not in r.stderr


def test_installed_venv_cannot_see_the_checkout(venv_python, tmp_path):
    # guards the tests above: without system site-packages the checkout's venv is out of reach
    r = run([str(venv_python), "-c", "import pytest"], tmp_path)
    assert r.returncode != 0
