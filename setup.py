"""Ships the top-level lua/ tree inside the wheel as luabridge/lua, and builds the extension
luabridge._luajit21: lupa's wrapper over a LuaJIT built with LUA52COMPAT, as Torch7's was
(luabridge/lua52.py). Where that build cannot run, the package installs without it and luabridge
runs on the stock lupa, saying what it lacks."""
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, CompileError, LinkError

HERE = Path(__file__).parent


class BuildWithLua(build_py):
    def run(self) -> None:
        super().run()
        src = HERE / "lua"
        dst = Path(self.build_lib) / "luabridge" / "lua"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.pyc"))


def load_lua52():
    # by path: importing the package would import lupa and numpy, which a build need not have
    spec = importlib.util.spec_from_file_location("luabridge_lua52", HERE / "luabridge" / "lua52.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildLuaJIT(build_ext):
    def run(self) -> None:
        lua52 = load_lua52()
        try:
            self.translate(lua52)
            super().run()
        except (lua52.BuildFailed, CCompilerError, CompileError, LinkError) as e:
            if os.environ.get(lua52.REQUIRED_VARIABLE):   # `python -m luabridge.lua52 build` asked for it
                raise
            print(f"warning: luabridge builds without {lua52.EXTENSION} (LuaJIT with LUA52COMPAT): {e}\n"
                  "warning: it will run on the stock lupa, which lacks what Torch7's LuaJIT had",
                  file=sys.stderr)
            self.extensions = []

    def translate(self, lua52) -> None:
        """LuaJIT built (or cached) with the flag, then lupa's Cython source translated to C as
        luabridge._luajit21: the placeholder extension below gets its sources and objects."""
        cache = Path(os.environ.get("LUABRIDGE_LUA52_CACHE") or lua52.default_cache_dir())
        parts = lua52.prepare(cache, Path(self.build_temp).resolve() / "lua52")
        try:
            from Cython.Build import cythonize
            from Cython.Compiler.Errors import CompileError as CythonError
        except ImportError as e:
            raise lua52.BuildFailed(f"Cython is not installed ({e}); it is a build requirement") from None
        (extension,) = self.extensions   # the placeholder below, finalized by build_ext
        extension.include_dirs = parts["include_dirs"]
        extension.extra_objects = parts["extra_objects"]
        extension.libraries = ["m", "dl"]
        extension.define_macros = [("CYTHON_CLINE_IN_TRACEBACK", "0")]
        extension.sources = [parts["pyx"]]
        try:
            (translated,) = cythonize([extension], include_path=parts["include_dirs"][:1], quiet=True)
        except CythonError as e:
            raise lua52.BuildFailed(f"Cython could not translate {parts['pyx']}: {e}") from None
        extension.sources = translated.sources


setup(cmdclass={"build_py": BuildWithLua, "build_ext": BuildLuaJIT},
      # the sources are lupa's, fetched and staged at build time (BuildLuaJIT)
      ext_modules=[Extension("luabridge._luajit21", sources=[])])
