import threading

import numpy as np
import pytest

import luabridge


def test_execute_eval_and_require(lua):
    assert luabridge.eval("1 + 2") == 3
    assert luabridge.execute("local a, b = 2, 5\nreturn a * b") == 10
    assert luabridge.execute("return 1, 'x'") == (1, "x")
    torch = luabridge.require("torch")
    assert torch.typename(torch.FloatTensor(2)) == "torch.FloatTensor"


def test_error_carries_message_and_traceback(lua):
    with pytest.raises(luabridge.LuaError) as info:
        luabridge.execute("local t = torch.Tensor(3)\nlocal r = t:narrow(1, 2, 5)\nreturn r")
    assert "narrow" in info.value.message and "size 3" in info.value.message
    assert "(execute):2" in info.value.message
    assert "stack traceback" in info.value.traceback


def test_syntax_error_is_lua_error(lua):
    with pytest.raises(luabridge.LuaError, match="expected"):
        luabridge.execute("return (")


def test_dofile_and_lua_path(tmp_path, lua):
    (tmp_path / "mymod.lua").write_text("local M = {}\nfunction M.twice(x) return 2 * x end\nreturn M\n")
    (tmp_path / "script.lua").write_text("local m = require 'mymod'\nreturn m.twice(21)\n")
    luabridge.add_lua_path(tmp_path)
    assert luabridge.dofile(tmp_path / "script.lua") == 42
    (tmp_path / "bad.lua").write_text("local x = 1\nerror('boom')\n")
    with pytest.raises(luabridge.LuaError, match="bad.lua:2: boom"):
        luabridge.dofile(tmp_path / "bad.lua")


def test_one_runtime_per_thread(lua):
    main = luabridge.runtime()
    assert luabridge.runtime() is main
    seen = {}

    def work():
        seen["rt"] = luabridge.runtime()
        luabridge.require("torch")
        seen["sum"] = luabridge.execute("local t = torch.Tensor(4):fill(2); return t[1] + t[4]")

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert seen["rt"] is not main and seen["sum"] == 4


def test_lua_sources_found():
    assert (luabridge.lua_dir() / "torch" / "init.lua").is_file()


def test_lua_path_from_the_environment(tmp_path, monkeypatch, lua):
    (tmp_path / "envmod.lua").write_text("return { answer = 42 }\n")
    monkeypatch.setenv("LUA_PATH", str(tmp_path / "?.lua"))
    seen = {}

    def work():  # a new thread gets a new runtime, which reads LUA_PATH
        seen["answer"] = luabridge.execute("return require('envmod').answer")

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert seen["answer"] == 42


def test_lua_strings_that_are_not_utf8_round_trip():
    # Lua strings are bytes: bytes that are not UTF-8 arrive as surrogate escapes, go back unchanged
    raw = luabridge.eval("'a\\255\\128b'")
    assert raw.encode("utf-8", "surrogateescape") == b"a\xff\x80b"
    assert luabridge.eval("function(s) return s == 'a\\255\\128b', #s end")(raw) == (True, 4)
    assert luabridge.eval("'h\\195\\169'") == "h\u00e9"        # UTF-8 text is plain text


def test_error_messages_show_bytes_that_are_not_utf8():
    with pytest.raises(luabridge.LuaError) as info:
        luabridge.execute("error('bad \\255 byte', 0)")
    assert info.value.message == "bad \\xff byte"
    str(info.value).encode("utf-8")  # printable
