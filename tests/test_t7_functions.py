"""Lua functions in .t7 data (lua/torch/File.lua). Memory files (torch.serialize / deserialize,
MemoryFile, clone) load the bytecode this runtime writes, with its upvalues, shared ones still
shared, as torch7 does; files from disk refuse functions unless functions = 'load'; bytecode of
other Lua versions is named and refused. Expected values are worked out by hand from the closures'
code, and the files' bytes are built with struct from torch7's layout (File.lua: type 8, index,
bytecode, then the upvalues as a list of {name, id, value})."""
from __future__ import annotations

import io
import struct

import numpy as np
import pytest

import luabridge
from helpers import T7_FIXTURES, lua_fn, needs_t7_fixtures
from luabridge import LuaError, t7

# A counter whose functions share the upvalues n and log; fib refers to itself through c.
COUNTER = """(function()
  local n, log, c = 0, {}, {}
  function c.inc(k) n = n + k; log[#log + 1] = n; return n end
  function c.get() return n end
  function c.history() return log end
  c.fib = function(k) if k < 2 then return k end return c.fib(k - 1) + c.fib(k - 2) end
  c.logAlias = log
  return c
end)()"""

CHECK_COPY = lua_fn("""function(c, r)
  local results = { r.fib(10), r.inc(3), r.inc(4), r.get(), c.get() }
  local h = r.history()
  return results, #h, h[1], h[2], h == r.logAlias, r.fib ~= c.fib
end""")


def check_copy(original, copy) -> None:
    results, n_log, first, second, same_log, fresh = CHECK_COPY(original, copy)
    # fib(10) = 55; the copy's counter counts 3 then 7; the original's stays at 0
    assert list(results.values()) == [55, 3, 7, 7, 0]
    assert (n_log, first, second) == (2, 3, 7)
    assert same_log and fresh   # the log upvalue is the table the copy holds as logAlias


@pytest.mark.parametrize("mode", ["binary", "ascii", "b32"])
def test_serialize_round_trip(mode):
    luabridge.require("torch")
    c = luabridge.eval(COUNTER)
    copy = lua_fn("function(c, m) return torch.deserialize(torch.serialize(c, m), m) end")(c, mode)
    check_copy(c, copy)


def test_memory_file_round_trip():
    luabridge.require("torch")
    c = luabridge.eval(COUNTER)
    copy = lua_fn("""function(c)
        local f = torch.MemoryFile():binary()
        f:writeObject(c)
        f:seek(1)
        return f:readObject() end""")(c)
    check_copy(c, copy)


def test_shared_upvalue_across_functions_and_tables():
    """Two closures share b but not a; after the round trip, setting b through one shows in the
    other, and a stays private to f."""
    luabridge.require("torch")
    out = lua_fn("""function()
        local a, b = 10, 1
        local t = { f = function() a = a + 1 return a + b end }
        local g = { function(v) b = v end, function() return b end }
        local r = torch.deserialize(torch.serialize({ t, g }))
        local f, set, get = r[1].f, r[2][1], r[2][2]
        set(100)
        return f(), get(), f(), b end""")()
    assert out == (111, 100, 112, 1)   # a: 11 then 12, plus b = 100; the original b untouched


def test_clone_copies_closures():
    luabridge.require("nn")
    out = lua_fn("""function()
        local m = nn.Linear(2, 2)
        local scale = { 2 }
        m.post = function(x) return x * scale[1] end
        m.setScale = function(s) scale[1] = s end
        local c = m:clone()
        c.setScale(5)
        return c.post(3), m.post(3) end""")()
    assert out == (15, 6)


def test_disk_files_need_functions_load(tmp_path):
    luabridge.require("torch")
    path = str(tmp_path / "counter.t7")
    c = luabridge.eval(COUNTER)
    lua_fn("function(p, c) torch.save(p, c) end")(path, c)
    load = lua_fn("function(...) return torch.load(...) end")
    with pytest.raises(LuaError, match=r"torch\.load: <\?>\.\w+ is a Lua function \(LuaJIT 2\.1 bytecode\): "
                                       r"functions in files are not loaded.*functions = 'load'"):
        load(path)
    check_copy(c, load(path, luabridge.eval("{functions = 'load'}")))
    skipped = load(path, luabridge.eval("{functions = 'skip'}"))
    assert sorted(skipped.keys()) == ["logAlias"]
    # from Python: luabridge.load takes the same option; t7.read refuses and says how
    copy = luabridge.load(path, functions="load")
    assert (copy["inc"](5), copy["inc"](6), copy["fib"](7)) == (5, 11, 13)
    with pytest.raises(t7.T7Error, match=r"is a Lua function \(LuaJIT 2\.1 bytecode\).*functions='load'"):
        t7.read(path)


def function_file(bytecode: bytes) -> bytes:
    """A function with no upvalues in torch7's layout."""
    return struct.pack("<iii", 8, 1, len(bytecode)) + bytecode + struct.pack("<iii", 3, 2, 0)


FOREIGN = {
    b"\x1bLJ\x01\x02rest": "LuaJIT 2.0 bytecode",
    b"\x1bLJ\x02\x02rest": r"LuaJIT 2\.1 bytecode without GC64 \(LuaJIT 2\.1\.0-beta",
    b"\x1bLJ\x02\x09rest": "big-endian LuaJIT 2.1 bytecode",
    b"\x1bLua\x51rest": r"Lua 5\.1 bytecode",
    b"print(1)": "not bytecode",
}


@pytest.mark.parametrize("bytecode", list(FOREIGN), ids=lambda b: FOREIGN[b].split(" ")[0])
def test_foreign_bytecode_is_named_and_refused(tmp_path, bytecode):
    luabridge.require("torch")
    kind = FOREIGN[bytecode]
    data = function_file(bytecode)
    de = lua_fn("function(s, o) return torch.deserialize(s, 'binary', o) end")
    with pytest.raises(LuaError, match=rf"<\?> is a Lua function in {kind}.*, which this runtime \(LuaJIT 2\.1"
                                       r".*cannot load"):
        de(data)
    path = tmp_path / "f.t7"
    path.write_bytes(data)
    with pytest.raises(LuaError, match=rf"<\?> is a Lua function \({kind}.*functions = 'skip', or re-save") as e:
        lua_fn("function(p) return torch.load(p) end")(str(path))
    assert "functions = 'load'" not in e.value.message   # not offered: it could not load
    assert de(data, luabridge.eval("{functions = 'skip'}")) is None
    with pytest.raises(t7.T7Error, match=rf"is a Lua function \({kind}.*cannot load it anyway"):
        t7.read(path)


@needs_t7_fixtures
def test_torch7_file_of_luajit20_bytecode():
    with pytest.raises(LuaError, match=r"LuaJIT 2\.0 bytecode, which this runtime .* cannot load"):
        luabridge.load(T7_FIXTURES / "function.t7", functions="load")


def test_paths_name_the_root_as_torch7():
    luabridge.require("torch")
    write = lua_fn("""function(name)
        local f = torch.MemoryFile():binary()
        f:writeObject({ a = { 1, coroutine.create(print) } }, name) end""")
    with pytest.raises(LuaError, match=r"writeObject: Unwritable object <thread> \(at <\?>\.a\[2\]\)"):
        write(None)
    with pytest.raises(LuaError, match=r"Unwritable object <thread> \(at model\.a\[2\]\)"):
        write("model")
    # torch7's test_writeObject: an upvalue path <?>.outer.theinner.baz.<upvalue>
    err = lua_fn("""function()
        local co = coroutine.create(print)
        local inner = { baz = function() return co end }
        local outer = { theinner = inner }
        return select(2, pcall(torch.serialize, function() return outer end)) end""")()
    assert "(at <?>.outer.theinner.baz.co)" in err
    bad = struct.pack("<iii", 3, 1, 1) + struct.pack("<ii", 2, 1) + b"k" + struct.pack("<i", 99)
    with pytest.raises(LuaError, match=r"unknown object type code 99 \(at <\?>\.k, byte \d+\)"):
        lua_fn("function(s) return torch.deserialize(s) end")(bad)
    with pytest.raises(t7.T7Error, match=r"unknown type code 99 at byte 21 \(in <\?>\.k\)"):
        t7.read(io.BytesIO(bad))


def test_values_still_compare_after_round_trip():
    """Numbers computed by a loaded closure over a tensor upvalue match numpy's."""
    luabridge.require("torch")
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = lua_fn("""function(t)
        local f = function(k) return t:clone():mul(k):sum() end
        return torch.deserialize(torch.serialize(f))(3) end""")(luabridge.from_numpy(a))
    assert out == 3 * a.sum()


def test_skipped_function_in_ascii_whose_bytecode_has_a_newline():
    """ascii strings end with a newline after their bytes: a bytecode holding one at its 6th byte
    must not be taken for that end (fuzz case seed 12 #13120)."""
    luabridge.require("torch")
    # made in a chunk named "=(execute)": 10 bytes, so the chunk name's length byte is a newline
    data = luabridge.to_numpy(luabridge.execute("""local up = {1}
        return torch.CharTensor(torch.serializeToStorage({function() return up end, up}, 'ascii'))""")).tobytes()
    bytecode_start = data.index(b"\x1bLJ")
    assert data[bytecode_start + 5:bytecode_start + 6] == b"\n"   # after the flags byte
    assert t7.read(io.BytesIO(data), "ascii", functions="skip") == {2: [1]}
    r = lua_fn("function(s) return torch.deserialize(s, 'ascii', {functions = 'skip'}) end")(data)
    assert r[1] is None and r[2][1] == 1
