"""Ships the top-level lua/ tree inside the wheel as luabridge/lua."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithLua(build_py):
    def run(self) -> None:
        super().run()
        src = Path(__file__).parent / "lua"
        dst = Path(self.build_lib) / "luabridge" / "lua"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.pyc"))


setup(cmdclass={"build_py": BuildWithLua})
