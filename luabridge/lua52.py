"""Builds and installs lupa with its LuaJIT compiled as Torch7's was: with
LUAJIT_ENABLE_LUA52COMPAT (`#` honours `__len` on tables, `pairs`/`ipairs` honour
`__pairs`/`__ipairs`, a call's `(` may open a new line, Lua 5.2's library additions).

    python -m luabridge.lua52 build [--cache-dir DIR]

lupa's sdist bundles LuaJIT 2.1 and its Cython output, so the build needs a C compiler and make,
not Cython. The wheel is cached: a second run installs the cached one, or nothing when the
running lupa already has the flag.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Sequence

from .runtime import LUA52COMPAT

FLAG = "-DLUAJIT_ENABLE_LUA52COMPAT"
LOCAL_VERSION = "lua52compat"   # lupa 2.8+lua52compat: told apart from the stock wheel
KEPT_LUA = "luajit21"           # the only Lua luabridge runs; lupa's setup.py builds every one it finds


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "luabridge" / "lua52"


def lupa_version() -> str:
    """The installed lupa's release, without a local part (2.8 for 2.8+lua52compat)."""
    return importlib.metadata.version("lupa").split("+")[0]


class BuildFailed(Exception):
    """A step of the build failed; the message says which (pip has printed its own output)."""


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    command = [sys.executable, "-m", "pip", *args]
    if subprocess.run(command, env=env).returncode != 0:
        raise BuildFailed(f"`pip {' '.join(args)}` failed")


def _isolation() -> list[str]:
    # lupa's build needs setuptools only (its C from Cython is in the sdist): use the one here
    # when there is one, rather than install Cython into an isolated build environment
    return ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []


def download_sdist(version: str, into: Path) -> Path:
    # pip reads the sdist's metadata, and lupa's setup.py runs LuaJIT's make even for that:
    # `make -n` (MAKEFLAGS) keeps that step from compiling anything
    env = {**os.environ, "MAKEFLAGS": "-n"}
    _pip("download", "-q", "--no-deps", "--no-binary", ":all:", *_isolation(),
         f"lupa=={version}", "-d", str(into), env=env)
    return next(into.glob(f"lupa-{version}.tar.gz"))


def prepare_source(sdist: Path, into: Path) -> Path:
    """Extracts the sdist, keeps only LuaJIT 2.1 of the bundled Luas, marks the version local."""
    with tarfile.open(sdist) as tar:
        tar.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    source = next(into.glob("lupa-*/"))
    for bundled in (source / "third-party").iterdir():
        if bundled.name != KEPT_LUA:
            shutil.rmtree(bundled)
    # setup.py writes lupa/version.py from its VERSION line, so the local version goes there
    setup = source / "setup.py"
    release = sdist.name.removeprefix("lupa-").removesuffix(".tar.gz")
    line = f"VERSION = '{release}'"
    if line not in setup.read_text():
        raise BuildFailed(f"{setup} has no line {line!r} to mark the version local")
    setup.write_text(setup.read_text().replace(line, f"VERSION = '{release}+{LOCAL_VERSION}'", 1))
    return source


def build_wheel(source: Path, wheel_dir: Path) -> Path:
    # LuaJIT's src/Makefile assigns XCFLAGS itself, so the flag goes in as a make command-line
    # variable, through MAKEFLAGS (lupa's setup.py hands its environment to LuaJIT's make)
    env = {**os.environ, "MAKEFLAGS": f"-j{os.cpu_count() or 1} XCFLAGS={FLAG}"}
    _pip("wheel", "-q", "--no-deps", *_isolation(), "-w", str(wheel_dir), str(source), env=env)
    wheel = cached_wheel(wheel_dir, source.name.removeprefix("lupa-"))
    if wheel is None:
        raise BuildFailed(f"pip reported success but left no lupa wheel in {wheel_dir}")
    return wheel


def cached_wheel(wheel_dir: Path, version: str) -> Path | None:
    """The wheel built earlier for this lupa release and this Python, if any."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(wheel_dir.glob(f"lupa-{version}+{LOCAL_VERSION}-{tag}-*.whl"))
    return found[-1] if found else None


def build(cache_dir: Path, version: str) -> Path:
    """The LUA52COMPAT wheel for lupa `version`: from the cache, else built from the sdist."""
    wheel = cached_wheel(cache_dir, version)
    if wheel:
        return wheel
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="luabridge-lua52-") as work:
        sdist = download_sdist(version, Path(work))
        return build_wheel(prepare_source(sdist, Path(work)), cache_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m luabridge.lua52", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="build (or take from the cache) and install the wheel")
    build_command.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                               help="where built wheels are kept (default: %(default)s)")
    build_command.add_argument("--force", action="store_true", help="install even if the running lupa has the flag")
    commands.add_parser("status", help="say whether the running LuaJIT has LUA52COMPAT")
    options = parser.parse_args(argv)
    if options.command == "status":
        print(f"lupa {importlib.metadata.version('lupa')}: LUA52COMPAT {'on' if LUA52COMPAT else 'off'}")
        return 0 if LUA52COMPAT else 1
    if LUA52COMPAT and not options.force:
        print(f"luabridge.lua52: lupa {importlib.metadata.version('lupa')} already has LUA52COMPAT")
        return 0
    try:
        wheel = build(options.cache_dir, lupa_version())
        _pip("install", "-q", "--force-reinstall", "--no-deps", str(wheel))
    except BuildFailed as e:
        print(f"luabridge.lua52: {e}; the running lupa is unchanged", file=sys.stderr)
        return 1
    print(f"luabridge.lua52: installed {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
