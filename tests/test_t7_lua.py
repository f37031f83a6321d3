"""The .t7 format in Lua (lua/torch/File.lua, DiskFile, MemoryFile, serialization.lua).

Expected bytes are built here with struct from torch7's layout (File.lua, generic/Tensor.c,
generic/Storage.c, THDiskFile.c); expected values come from numpy or from the fixtures' README.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import luabridge
from helpers import T7_FIXTURES as FIXTURES, lua_fn, needs_t7_fixtures as needs_fixtures
from luabridge import LuaError

TYPES = {
    "Byte": np.uint8, "Char": np.int8, "Short": np.int16, "Int": np.int32,
    "Long": np.int64, "Float": np.float32, "Double": np.float64, "Half": np.float16,
}
MODES = ["binary", "ascii", "b32", "b64"]


@pytest.fixture(scope="module")
def t7(lua):
    """Lua helpers: ser(obj, mode) -> bytes, de(bytes, mode, options) -> object, load(path, ...)."""
    lua.require("nn")
    raw = lua_fn("function(o, m) return torch.CharTensor(torch.serializeToStorage(o, m)) end")

    class H:
        @staticmethod
        def eval(code: str):
            """A Lua value; functions raise luabridge.LuaError on Lua errors."""
            return lua_fn(code) if code.startswith("function") else lua.eval(code)

        de = staticmethod(lua_fn("function(s, ...) return torch.deserialize(s, ...) end"))
        load = staticmethod(lua_fn("function(...) return torch.load(...) end"))
        save = staticmethod(lua_fn("function(...) return torch.save(...) end"))
        typ = staticmethod(lua_fn("torch.type"))

        @staticmethod
        def ser(obj, mode="binary") -> bytes:
            return luabridge.to_numpy(raw(obj, mode)).tobytes()

    return H


def pstr(s: bytes) -> bytes:
    return struct.pack("<i", len(s)) + s


def torch_header(index: int, name: bytes) -> bytes:
    return struct.pack("<ii", 4, index) + pstr(b"V 1") + pstr(name)


def float_tensor_bytes(values, long="q", cls=b"torch.FloatTensor", st=b"torch.FloatStorage") -> bytes:
    n = len(values)
    return (torch_header(1, cls) + struct.pack("<i", 1) + struct.pack("<" + long * 3, n, 1, 1)
            + torch_header(2, st) + struct.pack("<" + long, n) + struct.pack(f"<{n}f", *values))


# ---------------------------------------------------------------------------------------------
# exact encodings


def test_scalar_encodings(t7):
    assert t7.ser(1) == struct.pack("<id", 1, 1.0)
    assert t7.ser(-2.5) == struct.pack("<id", 1, -2.5)
    assert t7.ser("ab") == struct.pack("<ii", 2, 2) + b"ab"
    assert t7.ser(True) == struct.pack("<ii", 5, 1)
    assert t7.ser(None) == struct.pack("<i", 0)
    assert t7.ser(1, "ascii") == b"1\n1\n"
    assert t7.ser(0.1, "ascii") == b"1\n0.10000000000000001\n"
    assert t7.ser("x y", "ascii") == b"2\n3\nx y\n"


def test_table_encoding(t7):
    tbl = t7.eval("{'x'}")
    assert t7.ser(tbl) == struct.pack("<iiiid", 3, 1, 1, 1, 1.0) + struct.pack("<ii", 2, 1) + b"x"
    assert t7.ser(tbl, "ascii") == b"3\n1\n1\n1\n1\n2\n1\nx\n"


def test_tensor_encoding(t7):
    t = t7.eval("torch.FloatTensor({1.5, -2})")
    assert t7.ser(t) == float_tensor_bytes([1.5, -2])
    assert t7.ser(t, "b32") == float_tensor_bytes([1.5, -2], long="i")
    ascii = (b"4\n1\n3\nV 1\n17\ntorch.FloatTensor\n1\n2\n1\n1\n"
             b"4\n2\n3\nV 1\n18\ntorch.FloatStorage\n2\n1.5 -2\n")
    assert t7.ser(t, "ascii") == ascii


def test_reference_encoding(t7):
    # {t, t}: the second occurrence is the type code and the index of the first
    s = t7.ser(t7.eval("(function() local t = {} return {t, t} end)()"))
    inner = struct.pack("<iii", 3, 2, 0)
    expected = (struct.pack("<iii", 3, 1, 2) + struct.pack("<id", 1, 1.0) + inner
                + struct.pack("<id", 1, 2.0) + struct.pack("<ii", 3, 2))
    assert s == expected


def test_key_order_is_fixed(t7):
    # 1..n, then other numbers, strings, booleans, each ascending: the same bytes in every process
    tbl = t7.eval("{'x', [0.5] = 1, b = 2, a = 3, [true] = 4, [false] = 5}")
    num, text = (lambda v: struct.pack("<id", 1, v)), (lambda b: struct.pack("<ii", 2, len(b)) + b)
    boolean = lambda v: struct.pack("<ii", 5, int(v))
    pairs = [(num(1), text(b"x")), (num(0.5), num(1)), (text(b"a"), num(3)), (text(b"b"), num(2)),
             (boolean(False), num(5)), (boolean(True), num(4))]
    assert t7.ser(tbl) == struct.pack("<iii", 3, 1, 6) + b"".join(k + v for k, v in pairs)


def test_same_model_saves_to_same_bytes_in_two_processes(tmp_path):
    import subprocess
    import sys
    code = ("require 'nn'; torch.manualSeed(3); local m = nn.Sequential():add(nn.Linear(3, 4))"
            ":add(nn.ReLU()):add(nn.Linear(4, 2)); torch.save(arg[1], {model = m, epoch = 2, lr = 0.1})")
    script = tmp_path / "save.lua"
    script.write_text(code)
    outs = []
    for i in range(2):
        out = tmp_path / f"m{i}.t7"
        subprocess.run([sys.executable, "-m", "luabridge", "th", str(script), str(out)], check=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


# ---------------------------------------------------------------------------------------------
# torch7's files


@needs_fixtures
def test_fixture_tensors(t7):
    d = t7.load(str(FIXTURES / "doubletensor.t7"))
    assert t7.typ(d) == "torch.DoubleTensor"
    np.testing.assert_array_equal(luabridge.to_numpy(d), [[1, 2, 3], [4, 5, 6.9]])
    f = t7.load(str(FIXTURES / "floattensor.t7"))
    a = luabridge.to_numpy(f)
    assert t7.typ(f) == "torch.FloatTensor" and a.shape == (2, 3, 4)
    assert abs(a.astype(np.float64).sum() - 12.97241666913) < 1e-5
    torchfile = pytest.importorskip("torchfile")
    np.testing.assert_array_equal(a, torchfile.load(str(FIXTURES / "floattensor.t7")))


@needs_fixtures
def test_fixture_tables(t7):
    h = t7.load(str(FIXTURES / "hello=123.t7"))
    assert dict(h.items()) == {"hello": 123}
    lst = ["hello", "world", "third item", 123]
    assert list(t7.load(str(FIXTURES / "list_table.t7")).values()) == lst
    m1 = dict(t7.load(str(FIXTURES / "map_table1.t7")).items())
    assert m1 == {1: "hello", 2: "world", 3: "third item", 4: 123, 0: "zero"}
    m2 = dict(t7.load(str(FIXTURES / "map_table2.t7")).items())
    assert m2 == {1: "hello", 2: "world", 3: "third item", 4: 123, "a": "non number key"}
    r = t7.load(str(FIXTURES / "recursive_kv_table.t7"))
    assert t7.eval("function(r) local k, v = next(r) return k == r and v == r and next(r, k) == nil end")(r)


@needs_fixtures
def test_fixture_tds(t7):
    # a table before require 'tds', a tds userdata after (another test may have required it)
    entries = t7.eval("function(x) local t = {} for k, v in pairs(x) do t[k] = v end return t end")
    assert dict(entries(t7.load(str(FIXTURES / "tds_hash.t7"))).items()) == {1: 2, 2: 3, 10: 11}
    assert list(entries(t7.load(str(FIXTURES / "tds_vec.t7"))).values()) == [123, 456]


@needs_fixtures
def test_fixture_classes(t7):
    # the files' classes Blah and A, read as classes of ours through aliases (no global classes
    # named Blah or A are made: other tests load these files with no such class)
    aliases = t7.eval("""function(on) for _, n in ipairs{'Blah', 'A'} do
        if not torch.getmetatable('t7test.' .. n) then torch.class('t7test.' .. n) end
        torch.File.classAliases[n] = on and 't7test.' .. n or nil end end""")
    aliases(True)
    try:
        assert t7.typ(t7.load(str(FIXTURES / "custom_class.t7"))) == "t7test.Blah"
        r = t7.load(str(FIXTURES / "recursive_class.t7"))
    finally:
        aliases(False)
    assert t7.typ(r) == "t7test.A" and t7.eval("function(r) return r.a == r end")(r)
    with pytest.raises(LuaError, match=r"unknown Torch class <Blah>"):
        t7.load(str(FIXTURES / "custom_class.t7"))
    blah = t7.load(str(FIXTURES / "custom_class.t7"), t7.eval("{unknownClasses = 'table'}"))
    assert (blah.__typename, blah.__version) == ("Blah", 1)
    luabridge.require("nngraph")
    n = t7.load(str(FIXTURES / "nngraph_node.t7"))
    assert t7.typ(n) == "nngraph.Node" and n.data.annotations.hello == 123
    g = t7.load(str(FIXTURES / "gmodule_with_linear_identity.t7"))
    assert t7.typ(g) == "nn.gModule"


@needs_fixtures
@pytest.mark.parametrize("name", ["function.t7", "function_upvals.t7"])
def test_fixture_functions(t7, name):
    with pytest.raises(LuaError, match=r"torch.load: <\?> is a Lua function \(LuaJIT 2.0 bytecode\).*functions = 'skip'"):
        t7.load(str(FIXTURES / name))
    assert t7.load(str(FIXTURES / name), t7.eval("{functions = 'skip'}")) is None


def test_function_location_in_message(t7):
    code = bytes(range(16))
    fn = struct.pack("<ii", 8, 3) + pstr(code) + struct.pack("<iii", 3, 4, 0)
    data = (struct.pack("<iii", 3, 1, 1) + struct.pack("<ii", 2, 7) + b"modules"
            + struct.pack("<iii", 3, 2, 1) + struct.pack("<id", 1, 3.0) + fn)
    with pytest.raises(LuaError, match=r"<\?>\.modules\[3\] is a Lua function"):
        t7.de(data)
    r = t7.de(data, "binary", t7.eval("{functions = 'skip'}"))
    assert list(r.modules.items()) == []


def test_unknown_class(t7):
    data = torch_header(1, b"NoSuch.Klass") + struct.pack("<iii", 3, 2, 1) \
        + struct.pack("<ii", 2, 1) + b"w" + struct.pack("<id", 1, 5.0)
    with pytest.raises(LuaError, match=r"unknown Torch class <NoSuch.Klass>"):
        t7.de(data)
    r = t7.de(data, t7.eval("{unknownClasses = 'table'}"))
    assert r.w == 5 and r.__typename == "NoSuch.Klass" and r.__version == 1
    with pytest.raises(LuaError, match="bad value"):
        t7.de(data, t7.eval("{unknownClasses = 'maybe'}"))


def test_class_aliases_and_cuda(t7):
    data = float_tensor_bytes([1.0, 2.0], cls=b"legacy.FloatTensor")
    t7.eval("function() torch.File.classAliases['legacy.FloatTensor'] = 'torch.FloatTensor' end")()
    try:
        t = t7.de(data)
    finally:
        t7.eval("function() torch.File.classAliases['legacy.FloatTensor'] = nil end")()
    assert t7.typ(t) == "torch.FloatTensor"
    cuda = float_tensor_bytes([3.0, 4.0], cls=b"torch.CudaTensor", st=b"torch.CudaStorage")
    t = t7.de(cuda)
    usable = t7.eval("(pcall(torch.CudaStorage, 1))")
    assert t7.typ(t) == ("torch.CudaTensor" if usable else "torch.FloatTensor")
    np.testing.assert_array_equal(luabridge.to_numpy(t7.eval("function(t) return t:float() end")(t)), [3, 4])


# ---------------------------------------------------------------------------------------------
# round trips


def _views(a: np.ndarray):
    return {"w": a, "t": a.T, "n": a[1:3, 1:], "s": a[::2, ::3]}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(TYPES))
def test_tensor_round_trip(t7, rng, mode, name):
    dt = TYPES[name]
    lo, hi = (0, 250) if name == "Byte" else (-100, 100)
    a = rng.integers(lo, hi, size=(4, 6)).astype(dt)
    if name in ("Float", "Double"):
        a = (rng.standard_normal((4, 6)) * 10).astype(dt)
    # views of one storage, made in Lua: transposed, narrowed (offset 8), strided (a[::2, ::3])
    make = t7.eval(f"""function(b) return {{w = b, t = b:t(), n = b:narrow(1, 2, 2):narrow(2, 2, 5),
        s = b.new():set(b:storage(), 1, torch.LongStorage{{2, 2}}, torch.LongStorage{{12, 3}}),
        z = torch.{name}Tensor(0, 3), st = b:storage()}} end""")
    r = t7.de(t7.ser(make(luabridge.from_numpy(a)), mode), mode)
    for key, v in _views(a).items():
        assert t7.typ(r[key]) == f"torch.{name}Tensor"
        np.testing.assert_array_equal(luabridge.to_numpy(r[key]), v)
    # one storage: views written with their strides and offsets, as torch7 writes them
    same = t7.eval("""function(r) return r.w:storage() == r.st and r.t:storage() == r.st
        and r.n:storage() == r.st and r.s:storage() == r.st and r.n:storageOffset() == 8
        and r.t:stride(1) == 1 and r.s:stride(1) == 12 and r.st:size() == 24 end""")
    assert same(r)
    assert tuple(luabridge.to_numpy(r.z).shape) == (0, 3)
    # a storage last in the file: its size check counts the file's element size (b32: 4-byte longs)
    last = t7.de(t7.ser(make(luabridge.from_numpy(a)).st, mode), mode)
    np.testing.assert_array_equal(luabridge.to_numpy(t7.eval(f"function(s) return torch.{name}Tensor(s) end")(last)), a.ravel())


@pytest.mark.parametrize("mode", MODES)
def test_values_round_trip(t7, mode):
    obj = t7.eval(r"{1.5, -0.0, 1/0, -1/0, 2^60, 0.1, 'a\0b\n\255 c', '', true, false, "
                  r"nested = {x = {y = 'z'}}, [2.5] = 'float key', [true] = 1}")
    r = t7.de(t7.ser(obj, mode), mode)
    check = t7.eval(r"""function(r) return r[1] == 1.5 and 1/r[2] == -1/0 and r[3] == 1/0 and r[4] == -1/0
        and r[5] == 2^60 and r[6] == 0.1 and r[7] == 'a\0b\n\255 c' and r[8] == '' and r[9] == true
        and r[10] == false and r.nested.x.y == 'z' and r[2.5] == 'float key' and r[true] == 1 end""")
    assert check(r)
    assert t7.eval("function(s, m) local x = torch.deserialize(s, m) return x ~= x end")(t7.ser(float("nan"), mode), mode)


@pytest.mark.parametrize("mode", ["binary", "ascii"])
def test_long_extremes(t7, mode):
    t = t7.eval("function() local t = torch.LongTensor(2) t:data()[0] = 4611686018427387905LL "
                "t:data()[1] = -4611686018427387905LL return t end")()
    r = t7.de(t7.ser(t, mode), mode)
    np.testing.assert_array_equal(luabridge.to_numpy(r), [2**62 + 1, -(2**62 + 1)])


@pytest.mark.parametrize("mode", ["binary", "ascii"])
def test_cycles_and_sharing(t7, mode):
    obj = t7.eval("(function() local a = {} a.self = a a[a] = a local t = torch.rand(3) "
                  "a.t1, a.t2, a.v = t, t, t:narrow(1, 2, 2) return a end)()")
    r = t7.de(t7.ser(obj, mode), mode)
    ok = t7.eval("function(r) return r.self == r and r[r] == r and r.t1 == r.t2 "
                 "and r.v:storage() == r.t1:storage() and r.v:storageOffset() == 2 end")
    assert ok(r)
    np.testing.assert_array_equal(luabridge.to_numpy(r.v), luabridge.to_numpy(obj.t1)[1:])


def test_referenced_false(t7):
    unref = t7.eval("""function(obj)
        local f = torch.MemoryFile():binary():referenced(false)
        f:writeObject(obj) f:seek(1)
        return f:readObject(), f:isReferenced() end""")
    obj = t7.eval("(function() local t = torch.rand(3) return {t, t} end)()")
    r, referenced = unref(obj)
    assert referenced is False
    assert t7.eval("function(r) return r[1] ~= r[2] and r[1]:storage() ~= r[2]:storage() end")(r)
    np.testing.assert_array_equal(luabridge.to_numpy(r[1]), luabridge.to_numpy(r[2]))


@pytest.mark.parametrize("mode", MODES)
def test_disk_round_trip(t7, tmp_path, rng, mode):
    a = rng.standard_normal((5, 7))
    path = str(tmp_path / f"x_{mode}.t7")
    obj = t7.eval("function(t) return {weight = t, name = 'w'} end")(luabridge.from_numpy(a))
    t7.save(path, obj, mode)
    r = t7.load(path, mode)
    assert r.name == "w"
    np.testing.assert_array_equal(luabridge.to_numpy(r.weight), a)
    if mode == "binary":
        raw = Path(path).read_bytes()
        assert raw == t7.ser(obj)


def test_nn_module_and_generator(t7, rng):
    m = t7.eval("nn.Sequential():add(nn.Linear(3, 2)):add(nn.Tanh())")
    r = t7.de(t7.ser(m))
    x = luabridge.from_numpy(rng.standard_normal((4, 3)))
    np.testing.assert_array_equal(luabridge.to_numpy(m.forward(m, x)), luabridge.to_numpy(r.forward(r, x)))
    same_draws = t7.eval("""function() local g = torch.Generator() torch.manualSeed(g, 7)
        local g2 = torch.deserialize(torch.serialize(g))
        return torch.random(g) == torch.random(g2) and torch.typename(g2) == 'torch.Generator' end""")
    assert same_draws()
    err = t7.eval("function() local m = nn.Linear(3, 2) return nn.Jacobian.testIO(m, torch.rand(2, 3)) end")()
    assert err == (0, 0)


def test_unwritable(t7):
    with pytest.raises(LuaError, match=r"torch.serialize: Unwritable object <function> \(at <\?>.f\)"):
        t7.ser(t7.eval("{f = print}"))   # a C function: no bytecode
    with pytest.raises(LuaError, match=r"Unwritable object <thread> \(at <\?>\[1\]\)"):
        t7.ser(t7.eval("{coroutine.create(print)}"))
    # upvalues are named as torch7 names them
    with pytest.raises(LuaError, match=r"Unwritable object <thread> \(at <\?>.fn.co\)"):
        t7.ser(t7.eval("(function() local co = coroutine.create(print) return {fn = function() return co end} end)()"))


def test_functions_round_trip(t7):
    """Closures are written as torch7 writes them; memory files load them back (see
    test_t7_functions.py for files on disk and other bytecode)."""
    obj = t7.eval("""(function() local n = 0
        local t = {inc = function() n = n + 1 return n end, get = function() return n end}
        t.rec = function(k) if k == 0 then return 0 end return 1 + t.rec(k - 1) end
        return t end)()""")
    for mode in ("binary", "ascii"):
        data = t7.ser(obj, mode)
        with pytest.raises(LuaError, match=r"<\?>\.\w+ is a Lua function .*functions = 'load'"):
            t7.de(data, mode, t7.eval("{functions = 'error'}"))
        skipped = t7.de(data, mode, t7.eval("{functions = 'skip'}"))
        assert list(skipped.keys()) == []
        r = t7.de(data, mode)
        assert (r.inc(), r.inc(), r.get(), r.rec(5)) == (1, 2, 2, 5)   # upvalue n stays shared


def test_write_hook(t7):
    same = t7.eval("""function()
        local f = torch.MemoryFile():binary()
        local t = torch.DoubleTensor({1, 2})
        f:writeObject({a = t, b = t, s = 'x'}, nil, function(o)
            if torch.typename(o) == 'torch.DoubleTensor' then return o:float() end return o end)
        f:seek(1)
        local r = f:readObject()
        return torch.typename(r.a), r.a == r.b, r.s end""")
    assert same() == ("torch.FloatTensor", True, "x")


# ---------------------------------------------------------------------------------------------
# the File API


def test_typed_reads_and_writes(t7):
    run = t7.eval(r"""function(mode)
        local f = torch.MemoryFile()[mode](torch.MemoryFile())
        f:writeInt(-7) f:writeDouble(0.25) f:writeFloat(torch.FloatStorage({1.5, 2.5}))
        f:writeLong(5) f:writeByte(200) f:writeChar(-3) f:writeShort(-300) f:writeBool(true)
        f:writeString('raw\n')
        f:seek(1)
        local a, b = f:readInt(), f:readDouble()
        local fs = f:readFloat(2)
        local l, by, ch, sh, bo = f:readLong(), f:readByte(), f:readChar(), f:readShort(), f:readBool()
        local rest = f:readString('*l')
        local pos = f:position()
        return a, b, fs[1], fs[2], torch.typename(fs), l, by, ch, sh, bo, rest, pos, f:storage():size()
    end""")
    for mode in ("binary", "ascii"):
        out = run(mode)
        assert out[:11] == (-7, 0.25, 1.5, 2.5, "torch.FloatStorage", 5, 200, -3, -300, True, "raw")
        assert out[11] == out[12]   # at the end; storage() holds the bytes and a final zero
        if mode == "binary":        # 4 + 8 + 2 * 4 + 8 + 1 + 1 + 2 + 4 (bool: an int) + 4 bytes
            assert out[11] == 41


def test_storage_fill_and_short_reads(t7):
    run = t7.eval("""function()
        local f = torch.MemoryFile():binary()
        f:writeDouble(torch.DoubleStorage({1, 2, 3}))
        f:seek(1)
        local s = torch.DoubleStorage(2)
        local n = f:readDouble(s)
        local ok, err = pcall(f.readDouble, f, torch.DoubleStorage(4))
        f:seek(1) f:quiet()
        local part = f:readDouble(10)
        return n, s[1], s[2], ok, err, part:size(), f:hasError() end""")
    n, s1, s2, ok, err, part, has_error = run()
    assert (n, s1, s2, ok) == (2, 1, 2, False)
    assert "read error: read 1 blocks instead of 4" in err
    assert (part, has_error) == (3, True)


def test_disk_file_api(t7, tmp_path):
    path = str(tmp_path / "f.bin")
    run = t7.eval("""function(path)
        local f = torch.DiskFile(path, 'w'):binary()
        f:writeInt(42) f:writeString('hello')
        local wpos = f:position()
        f:close()
        local closed_ok, closed_err = pcall(f.writeInt, f, 1)
        local g = torch.DiskFile(path, 'r'):binary()
        local ro_ok, ro_err = pcall(g.writeInt, g, 1)
        local v = g:readInt()
        local s = g:readString('*a')
        g:seek(1)
        local again = g:readInt()
        g:seekEnd()
        local endpos = g:position()
        g:close()
        return v, s, again, wpos, endpos, closed_ok, closed_err, ro_ok, ro_err,
               torch.DiskFile(path .. '.missing', 'r', true) == nil end""")
    v, s, again, wpos, endpos, closed_ok, closed_err, ro_ok, ro_err, quiet_nil = run(path)
    assert (v, s, again, wpos, endpos) == (42, "hello", 42, 10, 10)
    assert not closed_ok and "attempt to use a closed file" in closed_err
    assert not ro_ok and "attempt to write in a read-only file" in ro_err
    assert quiet_nil
    with pytest.raises(LuaError, match=r"torch.load: cannot open <.*missing> in mode r \(No such file"):
        t7.load(path + ".missing")
    with pytest.raises(LuaError, match=r"cannot open <.*missing> in mode r"):
        t7.eval("function(p, m) return torch.DiskFile(p, m) end")(path + ".missing", "r")


def test_memory_file_storage(t7):
    run = t7.eval("""function()
        local f = torch.MemoryFile():binary()
        f:writeInt(0x41424344)
        local st = f:storage()
        local g = torch.MemoryFile(st, 'r'):binary()
        return torch.typename(st), st:size(), st[5], g:readInt() end""")
    assert run() == ("torch.CharStorage", 5, 0, 0x41424344)
    with pytest.raises(LuaError, match="terminated by 0"):
        t7.eval("function() return torch.MemoryFile(torch.CharStorage({1, 2})) end")()


# ---------------------------------------------------------------------------------------------
# hostile and damaged input


def _sample_files(t7):
    model = t7.ser(t7.eval("nn.Sequential():add(nn.Linear(2, 2)):add(nn.ReLU())"))
    files = [model, t7.ser(t7.eval("{a = {1, 'two', true}, t = torch.IntTensor({1, 2, 3})}"), "ascii")]
    if FIXTURES.is_dir():
        files += [(FIXTURES / n).read_bytes() for n in ("doubletensor.t7", "list_table.t7", "tds_hash.t7")]
    return files


def test_every_truncation_fails_cleanly(t7):
    de_quiet = t7.eval("function(s, m) local ok, e = pcall(torch.deserialize, s, m) return ok, tostring(e) end")
    for i, data in enumerate(_sample_files(t7)):
        mode = "ascii" if i == 1 else "binary"
        for n in range(len(data)):
            if mode == "ascii" and not data[n:].strip():
                continue   # only the final newline missing: still a whole file
            ok, err = de_quiet(data[:n], mode)
            assert not ok and "torch.deserialize: " in err, (i, n, err)
        assert de_quiet(data, mode)[0], i   # the whole file reads


HOSTILE = {
    "huge table": (struct.pack("<iii", 3, 1, 0x7FFFFFFF), r"table size 2147483647 needs at least"),
    "negative table": (struct.pack("<iii", 3, 1, -5), r"bad table size -5"),
    "huge string": (struct.pack("<ii", 2, 0x7FFFFFF0) + b"abc", r"string length .* but only 3 are left"),
    "negative string": (struct.pack("<ii", 2, -1), r"bad string length -1"),
    "bad type code": (struct.pack("<i", 99), r"unknown object type code 99"),
    "forward reference": (struct.pack("<iii", 3, 1, 1) + struct.pack("<id", 1, 1) + struct.pack("<ii", 3, 5),
                          r"bad reference 5: no object with that index has been read \(next new object: 2\) \(at <\?>\[1\], byte 32\)"),
    "first index not 1": (struct.pack("<iii", 3, 9, 0), r"bad reference 9"),
    "huge storage": (torch_header(1, b"torch.FloatStorage") + struct.pack("<q", 1 << 60),
                     r"storage size 1152921504606846976 needs at least"),
    "negative storage": (torch_header(1, b"torch.FloatStorage") + struct.pack("<q", -4), r"bad storage size -4"),
    "huge dims": (torch_header(1, b"torch.FloatTensor") + struct.pack("<i", 0x7FFFFFFF),
                  r"tensor dimension count 2147483647 needs"),
    "many dims": (torch_header(1, b"torch.FloatTensor") + struct.pack("<i", 2000) + bytes(40000),
                  r"torch.FloatTensor: 2000 dimensions \(at most 64\)"),
    "negative size": (torch_header(1, b"torch.FloatTensor") + struct.pack("<iqqq", 1, -3, 1, 1) + struct.pack("<i", 0),
                      r"torch.FloatTensor: bad size -3 at dimension 1"),
    "long class name": (struct.pack("<ii", 4, 1) + pstr(b"V 1") + pstr(b"x" * 300), r"bad class name"),
    "odd class name": (struct.pack("<ii", 4, 1) + pstr(b"V 1") + pstr(b"a b\n"), r"bad class name"),
    "file class": (torch_header(1, b"torch.MemoryFile") + struct.pack("<iii", 3, 2, 0), r"unknown Torch class <torch.MemoryFile>"),
    "binary key": (struct.pack("<iii", 3, 1, 1) + struct.pack("<ii", 2, 3) + b"a\xff\n" + struct.pack("<i", 99),
                   r'unknown object type code 99 \(at <\?>\["a\\xff\\x0a"\], byte 27\)'),
    "nil key": (struct.pack("<iiii", 3, 1, 1, 0) + struct.pack("<id", 1, 1), r"table key is nil"),
}


def _extent_past_storage() -> bytes:
    # a 2x2 view (4 elements) over a 3-element storage
    return (torch_header(1, b"torch.FloatTensor") + struct.pack("<i", 2) + struct.pack("<5q", 2, 2, 2, 1, 1)
            + torch_header(2, b"torch.FloatStorage") + struct.pack("<q3f", 3, 1, 2, 3))


def _deep(levels: int) -> bytes:
    out = b"".join(struct.pack("<iiiid", 3, i + 1, 1, 1, 1.0) for i in range(levels))
    return out + struct.pack("<i", 0)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_input(t7, case):
    data, pattern = HOSTILE[case]
    with pytest.raises(LuaError, match="torch.deserialize: " + ".*" + pattern):
        t7.de(data)


ASCII_HOSTILE = {
    b"3\n1\n-1\n": r"bad table size -1",
    b"2\n99999\nab\n": r"string length 99999 needs at least 99999 bytes but only 3 are left",
    b"1\n" + b"9" * 100 + b"\n": r"number longer than 64 characters",
    b"1\nabc\n": r"read error: read 0 blocks instead of 1",
    b"4\n1\n3\nV 1\n18\ntorch.FloatStorage\n5\n1 2 3\n": r"read error: read 3 blocks instead of 5",
}


@pytest.mark.parametrize("data", list(ASCII_HOSTILE))
def test_hostile_ascii(t7, data):
    with pytest.raises(LuaError, match="torch.deserialize: .*" + ASCII_HOSTILE[data]):
        t7.de(data, "ascii")


@pytest.mark.parametrize("name, bits", [("Float", b"\xff" * 4), ("Double", b"\xff" * 8), ("Half", b"\xff" * 2),
                                        ("Double", b"\x01\x00\x00\x00\x00\x00\xf0\xff")])
def test_nan_payloads_become_plain_nans(t7, name, bits):
    """A negative NaN with payload is the bit pattern of a tagged Lua value once read into Lua
    (nil, or an object pointer): the reader rewrites NaNs as the canonical one."""
    size = len(bits)
    one = {4: struct.pack("<f", 1.0), 8: struct.pack("<d", 1.0), 2: np.float16(1).tobytes()}[size]
    data = torch_header(1, f"torch.{name}Storage".encode()) + struct.pack("<q", 3) + one + bits + one
    check = t7.eval("""function(s) local d = torch.DoubleStorage(3):copy(s)
        return type(s[2]), d[2] ~= d[2], d[1], d[3] end""")
    assert check(t7.de(data)) == ("number", True, 1, 1)


def test_nan_payload_number(t7):
    is_nan = t7.eval("function(s) local x = torch.deserialize(s) return type(x), x ~= x end")
    assert is_nan(struct.pack("<i", 1) + b"\xff" * 8) == ("number", True)


def test_hostile_structure(t7):
    with pytest.raises(LuaError, match=r"view of sizes 2x2, strides 2,1 from offset 1 needs 4 elements but the storage has 3"):
        t7.de(_extent_past_storage())
    wrong = (torch_header(1, b"torch.FloatTensor") + struct.pack("<i", 1) + struct.pack("<3q", 1, 1, 1)
             + torch_header(2, b"torch.DoubleStorage") + struct.pack("<qd", 1, 1.0))
    with pytest.raises(LuaError, match=r"storage must be a torch.FloatStorage, got torch.DoubleStorage"):
        t7.de(wrong)
    assert t7.eval("function(s) return torch.deserialize(s)[1] ~= nil end")(_deep(4000))
    with pytest.raises(LuaError, match=r"objects nested deeper than 4096 levels \(at <\?>\[1\].*levels\).*\[1\], byte 98308\)"):
        t7.de(_deep(5000))
    with pytest.raises(LuaError, match=r"torch.serialize: objects nested deeper than 4096"):
        t7.eval("function() local t = {} local c = t for i = 1, 5000 do c[1] = {} c = c[1] end "
                "return torch.serialize(t) end")()


def test_load_into_reused_buffers(t7, tmp_path, rng):
    # released large buffers are handed out again without zeroing when a file overwrites them
    path = str(tmp_path / "big.t7")
    data = rng.standard_normal(600_000).astype(np.float32)      # 2.4 MB: pooled when released
    t7.save(path, luabridge.from_numpy(data.copy()))
    stale = lua_fn("""function(n)
      for _ = 1, 3 do local s = torch.FloatStorage(n):fill(7); s = nil; collectgarbage() end
    end""")
    for _ in range(3):
        stale(600_000)
        got = luabridge.to_numpy(t7.load(path))
        np.testing.assert_array_equal(got, data)


def test_nn_classes_are_read_after_requiring_nn_on_demand(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "m.t7"
    script = tmp_path / "s.lua"
    script.write_text("require 'nn'; torch.save(arg[1], nn.Linear(2, 3))")
    subprocess.run([sys.executable, "-m", "luabridge", "th", str(script), str(path)], check=True)
    # `luabridge th` preloads torch only, as Torch7's th did (where this load failed): the reader
    # requires nn when it meets nn.Linear, in the one read of the file
    out = subprocess.run([sys.executable, "-m", "luabridge", "th", "-e",
                          f"print(package.loaded.nn == nil, torch.type(torch.load('{path}')), package.loaded.nn ~= nil)"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["true", "nn.Linear", "true"]


def test_unknown_cuda_type_is_an_unknown_class(t7):
    # torch.Cuda<X>Storage maps to torch.<X>Storage without a GPU, only when that class exists
    data = torch_header(1, b"torch.CudaBogusStorage") + struct.pack("<q", 0)
    with pytest.raises(LuaError, match=r"unknown Torch class <torch.CudaBogusStorage>"):
        t7.de(data)


def test_unwritable_fields_are_left_out_of_modules_too(t7, capfd):
    # as torch7: a field the format cannot hold is dropped with a warning, for nn modules as for
    # any torch class (nn.Module's write and the default both go through File:writeFields)
    run = t7.eval("""function()
      local m = nn.Linear(2, 3)
      m.callback = print
      local back = torch.deserialize(torch.serialize(m))
      return back.callback == nil, back.weight:equal(m.weight)
    end""")
    assert run() == (True, True)
    assert "cannot write object field <callback> of <nn.Linear>" in capfd.readouterr().err
