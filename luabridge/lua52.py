"""Builds luabridge's own LuaJIT module, `luabridge._luajit21`: lupa's Cython wrapper compiled
over LuaJIT 2.1 built as Torch7's was, with LUAJIT_ENABLE_LUA52COMPAT (`#` honours `__len` on
tables, `pairs`/`ipairs` honour `__pairs`/`__ipairs`, a call's `(` may open a new line, Lua 5.2's
library additions).

setup.py runs this as part of every build (wheel, sdist install, editable install), so a wheel
carries the flagged LuaJIT. Where the build cannot run (no C compiler, no make, no lupa sources),
the package installs without the extension and luabridge runs on the stock `lupa.luajit21`,
saying once what that LuaJIT lacks.

    python -m luabridge.lua52 status     # which LuaJIT runs, and whether it has the flag
    python -m luabridge.lua52 build      # (re)build the extension in place, in a checkout

The sources are lupa's own sdist (its `_lupa.pyx` and bundled LuaJIT), fetched with pip, or the
file LUABRIDGE_LUPA_SDIST names. Its module name is changed by compiling the same Cython source
under luabridge's package, so it never collides with an installed lupa. This module uses the
standard library only: setup.py loads it by path, before luabridge can be imported.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Sequence

FLAG = "-DLUAJIT_ENABLE_LUA52COMPAT"
LUPA_RELEASE = "2.8"        # the lupa whose Cython source and bundled LuaJIT are compiled
EXTENSION = "luabridge._luajit21"
SDIST_VARIABLE = "LUABRIDGE_LUPA_SDIST"
REQUIRED_VARIABLE = "LUABRIDGE_LUA52_REQUIRED"   # set: a failed build fails setup.py instead of falling back


class BuildFailed(Exception):
    """A step of the build failed; the message says which."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "luabridge" / "lua52"


def _run(command: list[str], what: str, **kwargs) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    except OSError as e:   # make or the compiler is missing
        raise BuildFailed(f"{what}: {e}") from None
    if result.returncode != 0:
        raise BuildFailed(f"{what} failed:\n{(result.stdout + result.stderr)[-3000:]}")


def lupa_sdist(cache: Path, release: str = LUPA_RELEASE) -> Path:
    """lupa's sdist: LUABRIDGE_LUPA_SDIST, else the cached download, else a new one from pip's index."""
    named = os.environ.get(SDIST_VARIABLE)
    if named:
        if not Path(named).is_file():
            raise BuildFailed(f"{SDIST_VARIABLE}={named} is not a file")
        return Path(named)
    sdist = cache / f"lupa-{release}.tar.gz"
    if sdist.is_file():
        return sdist
    cache.mkdir(parents=True, exist_ok=True)
    # pip reads an sdist's metadata by running its setup.py, and lupa's builds LuaJIT there:
    # `make -n` (MAKEFLAGS) keeps that step from compiling anything
    env = {**os.environ, "MAKEFLAGS": "-n"}
    with tempfile.TemporaryDirectory(dir=cache) as into:
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
              "--no-build-isolation", f"lupa=={release}", "-d", into], f"pip download lupa=={release}", env=env)
        shutil.move(next(Path(into).glob(f"lupa-{release}.tar.gz")), sdist)
    return sdist


def unpack(sdist: Path, into: Path) -> Path:
    """The sdist's lupa/ (the Cython source) and third-party/luajit21, unpacked under `into`."""
    wanted = ("/lupa/", "/third-party/luajit21/")
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if any(w in m.name for w in wanted)]
        if not members:
            raise BuildFailed(f"{sdist} holds no lupa/ or third-party/luajit21/")
        tar.extractall(into, members=members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return next(into.glob("lupa-*/"))


def build_luajit(source: Path) -> Path:
    """libluajit.a with the flag, position-independent (it links into a shared module)."""
    src = source / "third-party" / "luajit21" / "src"
    env = {**os.environ, "CFLAGS": (os.environ.get("CFLAGS", "") + " -fPIC").strip()}
    env.pop("MAKEFLAGS", None)
    # LuaJIT's Makefile assigns XCFLAGS itself, so the flag goes in on make's command line
    _run(["make", f"-j{os.cpu_count() or 1}", "libluajit.a", f"XCFLAGS={FLAG}"], "building LuaJIT", cwd=src, env=env)
    return src / "libluajit.a"


def stage_cython(source: Path, into: Path) -> Path:
    """lupa's Cython source laid out as the module luabridge._luajit21 (its `from . cimport
    luaapi` and `include "lock.pxi"` resolve beside it); returns the .pyx."""
    package = into / "luabridge"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.pxd").write_text("")   # makes `luabridge` a package to Cython's relative cimport
    for name in ("luaapi.pxd", "lock.pxi"):
        shutil.copy(source / "lupa" / name, package / name)
    pyx = package / "_luajit21.pyx"
    shutil.copy(source / "lupa" / "_lupa.pyx", pyx)
    return pyx


def prepare(cache: Path, stage: Path) -> dict:
    """Everything the extension's compile needs: LuaJIT built once per lupa release in `cache`,
    the Cython source staged in `stage`. Returns {'pyx', 'include_dirs', 'extra_objects'}."""
    source = cache / f"lupa-{LUPA_RELEASE}-lua52compat"
    library = source / "third-party" / "luajit21" / "src" / "libluajit.a"
    if not library.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as work:
            built = unpack(lupa_sdist(cache), Path(work))
            build_luajit(built)
            if source.exists():   # a stale, unfinished one
                shutil.rmtree(source)
            try:
                built.rename(source)
            except OSError:   # a concurrent build finished first: its result stands
                if not library.is_file():
                    raise
    return {"pyx": str(stage_cython(source, stage)),
            "include_dirs": [str(stage), str(library.parent)],
            "extra_objects": [str(library)]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m luabridge.lua52", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="say which LuaJIT runs and whether it has LUA52COMPAT")
    commands.add_parser("build", help="build luabridge._luajit21 in place (a checkout; needs a C compiler and make)")
    options = parser.parse_args(argv)
    if options.command == "build":
        checkout = Path(__file__).resolve().parent.parent
        if not (checkout / "setup.py").is_file():
            print("luabridge.lua52: build runs in a checkout; reinstall luabridge from its sdist instead",
                  file=sys.stderr)
            return 1
        return subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=checkout,
                              env={**os.environ, REQUIRED_VARIABLE: "1"}).returncode
    from .core.runtime import LUA52COMPAT, luajit21
    print(f"{luajit21.__name__} ({luajit21.__file__}): LUA52COMPAT {'on' if LUA52COMPAT else 'off'}")
    return 0 if LUA52COMPAT else 1


if __name__ == "__main__":
    sys.exit(main())
