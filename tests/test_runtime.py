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


NESTED = """local function inner(t)
  local r = t:narrow(1, 3, 2)
  return r
end
local function outer()
  local r = inner(torch.Tensor(3))
  return r
end
outer()
"""


def test_traceback_shows_the_users_frames_only(lua):
    # torch's own Lua (check.lua, Tensor.lua), LuaJIT's builtins and the call from Python are
    # left out: what is left is Lua's own traceback of the caller's code
    with pytest.raises(luabridge.LuaError) as info:
        luabridge.execute(NESTED)
    assert info.value.message.startswith("(execute):2: narrow: out of range")
    assert info.value.traceback.splitlines() == [
        "stack traceback:",
        "\t(execute):2: in function 'inner'",
        "\t(execute):6: in function 'outer'",
        "\t(execute):9: in main chunk",
    ]


def test_traceback_keeps_c_functions_between_user_frames(tmp_path, lua):
    (tmp_path / "broken_module.lua").write_text("local x = 1\nerror('cannot load')\n")
    (tmp_path / "main.lua").write_text("local function load()\n  require 'broken_module'\nend\nload()\n")
    luabridge.add_lua_path(tmp_path)
    with pytest.raises(luabridge.LuaError) as info:
        luabridge.dofile(tmp_path / "main.lua")
    lines = info.value.traceback.splitlines()
    assert lines[1].endswith("broken_module.lua:2: in main chunk")
    assert lines[2] == "\t[C]: in function 'require'"
    assert lines[3].endswith("main.lua:2: in function 'load'")
    assert lines[4].endswith("main.lua:4: in main chunk")
    assert len(lines) == 5


def test_traceback_of_a_library_error_called_from_python_is_empty(lua):
    # the whole stack is luabridge's own: the message alone says it
    from luabridge.core.runtime import bridge

    t, narrow = luabridge.eval("torch.Tensor(3)"), luabridge.eval("torch.Tensor.narrow")
    with pytest.raises(luabridge.LuaError) as info:
        bridge().call(narrow, t, 1, 3, 2)
    assert "narrow: out of range" in info.value.message
    assert info.value.traceback == ""


def test_full_traceback_on_request(monkeypatch):
    monkeypatch.setenv("LUABRIDGE_FULL_TRACEBACK", "1")
    seen = {}

    def work():  # a new thread's runtime reads the setting
        luabridge.require("torch")
        try:
            luabridge.execute(NESTED)
        except luabridge.LuaError as e:
            seen["traceback"] = e.traceback

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert "torch/Tensor.lua" in seen["traceback"] and "xpcall" in seen["traceback"]


def test_deep_recursion_traceback_keeps_both_ends(lua):
    with pytest.raises(luabridge.LuaError) as info:
        luabridge.execute("local function f(n)\n  if n == 0 then error('bottom') end\n"
                          "  local r = f(n - 1)\n  return r\nend\nf(50)\n")
    lines = info.value.traceback.splitlines()[1:]
    # Lua's convention: the first 12 and the last 10 frames around '...'
    assert len(lines) == 23 and lines[12] == "\t..."
    assert lines[0] == "\t(execute):2: in function 'f'"
    assert lines[1:12] == ["\t(execute):3: in function 'f'"] * 11
    assert lines[-1] == "\t(execute):6: in main chunk"


def test_object_of_another_thread_says_how_to_share(lua):
    from luabridge import nn

    m = nn.Linear(3, 2)
    x = np.arange(3.0)
    out = m.forward(x)
    seen: dict = {}

    def work():
        try:
            m.forward(x)
        except luabridge.LuaError as e:
            seen["forward"] = str(e)
        try:
            luabridge.to_numpy(out._lua)
        except luabridge.LuaError as e:
            seen["to_numpy"] = str(e)
        for key, use in (("field", lambda: m.weight), ("repr", lambda: repr(m)), ("array", lambda: np.asarray(out))):
            try:
                use()
            except luabridge.LuaError as e:
                seen[key] = str(e)
        # what the message advises: arrays cross threads, here into this thread's own module
        mine = nn.Linear(3, 2)
        mine.weight.numpy()[:] = weight
        mine.bias.numpy()[:] = bias
        seen["result"] = np.array(mine.forward(x))

    weight, bias = np.array(m.weight), np.array(m.bias)
    th = threading.Thread(target=work)
    th.start()
    th.join()
    for key in ("forward", "to_numpy", "field", "repr", "array"):
        assert "belongs to another thread's runtime" in seen[key]
        assert "belong to the thread that made them" in seen[key] and "numpy arrays" in seen[key]
    np.testing.assert_allclose(seen["result"], weight @ x + bias)


def test_lua52_library_functions_as_torch7s_luajit():
    """Torch7's LuaJIT had Lua 5.2's library additions (LUA52COMPAT); a runtime has them before
    any package is required."""
    result = {}

    def fresh_runtime() -> None:  # a thread has a runtime of its own, with nothing required
        result["values"] = list(luabridge.eval(
            "{table.pack(1, nil, 3).n, select(2, table.unpack({7, 8})), rawlen({1, 2, 3}), rawlen('ab'),"
            " package.searchers == package.loaders, (pcall(rawlen, 5))}").values())

    thread = threading.Thread(target=fresh_runtime)
    thread.start()
    thread.join()
    assert result["values"] == [3, 8, 3, 2, True, False]
