"""require 'sys.fpath' and require 'sys.colors': torch/sys installs both as modules of their own
(its CMakeLists lists init.lua colors.lua fpath.lua); MazeBase's MazeMap.lua requires sys.fpath.

fpath() gives the directory and the name of the file that calls it (checked against the path the
test wrote the file at); colors holds torch/sys's ANSI escape codes, 0;3N for a colour name and
1;3N for its capitalised bold form.
"""
import luabridge
from helpers import lua_fn


def test_fpath_names_the_calling_file(tmp_path):
    f = tmp_path / "sub" / "caller.lua"
    f.parent.mkdir()
    f.write_text("local fpath = require 'sys.fpath'\nlocal d, n = fpath()\nreturn d, n\n")
    d, name = lua_fn("function(p) return dofile(p) end")(str(f))
    assert (d, name) == (str(f.parent), "caller.lua")


def test_fpath_is_sys_fpath():
    assert lua_fn("function() require 'sys' return require('sys.fpath') == sys.fpath end")()


def test_colors():
    get = lua_fn("function(k) return require('sys.colors')[k] end")
    codes = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]
    for i, name in enumerate(codes):
        assert get(name) == f"\x1b[0;3{i}m"
        assert get(name.capitalize()) == f"\x1b[1;3{i}m"
    assert get("none") == "\x1b[0m"
