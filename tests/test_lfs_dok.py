"""lfs (LuaFileSystem's API) against Python's os, and xlua.unpack / dok as torch7's packages use them."""
from __future__ import annotations

import os
import stat

import pytest

import luabridge


@pytest.fixture(scope="module")
def lua():
    luabridge.require("torch")
    return luabridge


def run(code: str, *args):
    """Runs a Lua chunk with arguments (...)."""
    return luabridge.eval(f"function(...) {code} end")(*args)


def test_attributes_match_os_stat(lua, tmp_path):
    f = tmp_path / "data.bin"
    f.write_bytes(b"x" * 1234)
    os.chmod(f, 0o640)
    s = os.stat(f)
    attrs = run("local lfs = require 'lfs' return lfs.attributes(...)", str(f))
    assert attrs.mode == "file" and attrs.size == 1234 and attrs.permissions == "rw-r-----"
    assert attrs.modification == int(s.st_mtime) and attrs.ino == s.st_ino and attrs.nlink == 1
    assert run("return require('lfs').attributes(..., 'mode')", str(tmp_path)) == "directory"
    none, msg, errno = run("return require('lfs').attributes(...)", str(tmp_path / "nope"))
    assert none is None and "No such file" in msg and errno == 2


def test_dir_mkdir_rmdir_touch_link(lua, tmp_path):
    d = tmp_path / "sub"
    ok = run("return require('lfs').mkdir(...)", str(d))
    assert ok is True and d.is_dir()
    again, msg, _ = run("return require('lfs').mkdir(...)", str(d))
    assert again is None and "exists" in msg
    assert run("return require('lfs').touch(..., 1000, 2000)", str(d / "t")) is True
    assert os.stat(d / "t").st_mtime == 2000 and os.stat(d / "t").st_atime == 1000
    run("return require('lfs').link(...)", str(d / "t"), str(d / "l"), True)
    assert os.path.islink(d / "l")
    link = run("return require('lfs').symlinkattributes(...)", str(d / "l"))
    assert link.mode == "link" and link.target == str(d / "t")
    names = run("local t = {} for n in require('lfs').dir(...) do t[#t + 1] = n end table.sort(t) return t", str(d))
    assert list(names.values()) == [".", "..", "l", "t"]
    os.remove(d / "l"), os.remove(d / "t")
    assert run("return require('lfs').rmdir(...)", str(d)) is True and not d.exists()


def test_currentdir_and_chdir(lua, tmp_path):
    before = os.getcwd()
    try:
        cwd = run("local lfs = require 'lfs' assert(lfs.chdir(...)) return lfs.currentdir()", str(tmp_path))
        assert cwd == str(tmp_path) == os.getcwd()
    finally:
        os.chdir(before)


def test_bad_arguments_are_named(lua):
    with pytest.raises(luabridge.LuaError, match=r"lfs.attributes: bad argument #1 \(string expected, got number\)"):
        lua.execute("require('lfs').attributes(3)")
    with pytest.raises(luabridge.LuaError, match="invalid attribute name 'colour'"):
        lua.execute("require('lfs').attributes('.', 'colour')")
    with pytest.raises(luabridge.LuaError, match="cannot open /no/such/dir"):
        lua.execute("require('lfs').dir('/no/such/dir')")


UNPACK = """
require 'xlua'
local function f(...)
  return xlua.unpack({...}, 'f', 'adds', {arg = 'a', type = 'number', help = 'first', req = true},
    {arg = 'b', type = 'number', help = 'second', default = 5}, {arg = 'c', type = 'number', help = 'third', defaulta = 'a'})
end
"""


def test_xlua_unpack_named_positional_defaults(lua):
    got = lua.execute(UNPACK + "local p, a, b, c = f(1) local q = f{a = 7, b = 8} local r, x, y, z = f(1, 2, 3)"
                               " return a, b, c, q.a, q.b, q.c, x, y, z, q[1]")
    assert got == (1, 5, 1, 7, 8, 7, 1, 2, 3, 7)


def test_xlua_unpack_missing_required_prints_usage(lua):
    with pytest.raises(luabridge.LuaError) as e:
        lua.execute(UNPACK + "f()")
    assert "f: missing argument: a" in e.value.message
    assert "[b = number]" in e.value.message and "[default = 5]" in e.value.message


def test_xlua_unpack_class_and_dok(lua):
    got = lua.execute(UNPACK.replace("local function f", "local function unused") + """
      local obj = {}
      xlua.unpack_class(obj, {{size = 3}}, 'C', nil, {arg = 'size', type = 'number', help = 's'},
                        {arg = 'name', type = 'string', help = 'n', default = 'c'})
      require 'dok'
      local ok, msg = pcall(dok.error, 'broken', 'image.load')
      local _, v = dok.unpack({4}, 'g', nil, {arg = 'n', type = 'number', help = 'n'})
      return obj.size, obj.name, ok, msg, v""")
    assert got == (3, "c", False, "<image.load> broken", 4)
