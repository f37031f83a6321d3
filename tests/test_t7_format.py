"""One spec for both .t7 readers: lua/torch/t7format.lua, required by File.lua and parsed by
luabridge/t7/format.py without Lua (with luabridge/core/lua_table.py). The parse is checked
against Lua evaluating the same text, and the readers' rules (class names, limits, references)
against hand-made files."""
from __future__ import annotations

import io
import struct

import pytest

import luabridge
from helpers import lua_fn
from luabridge import LuaError, t7
from luabridge.core.lua_table import parse
from luabridge.t7 import format as t7format


def lua_value_as_python(v):
    """A Lua table as Python (lists for positional fields), strings as bytes decoded latin-1."""
    if isinstance(v, (int, float, str, bytes)):
        return v
    keys = list(v.keys())
    if keys == list(range(1, len(keys) + 1)):
        return [lua_value_as_python(v[k]) for k in keys]
    return {k: lua_value_as_python(v[k]) for k in keys}


def test_spec_parses_as_lua_evaluates_it():
    luabridge.require("torch")
    spec = luabridge.execute("return require 'torch.t7format'")
    as_bytes = lua_fn("""function(spec)
        local out = {}
        for i, entry in ipairs(spec.notT7) do out[i] = torch.ByteTensor(torch.ByteStorage():string(entry[1])) end
        return out end""")(spec)
    parsed = t7format.SPEC
    for key in ("types", "maxDepth", "maxDims", "maxIndex", "maxToken", "maxClassName", "classNamePunctuation",
                "luajitVersions", "luajitFlagBigEndian", "luajitFlagGC64", "luajitNoGC64", "versionPrefix",
                "classPackages", "prefixPackages", "headBytes"):
        assert lua_value_as_python(spec[key]) == parsed[key], key
    magics = [luabridge.to_numpy(as_bytes[i]).tobytes() for i in range(1, len(parsed["notT7"]) + 1)]
    assert magics == [m if isinstance(m, bytes) else m.encode("latin-1") for m, _ in parsed["notT7"]]
    assert [spec.notT7[i][2] for i in range(1, len(magics) + 1)] == [what for _, what in parsed["notT7"]]
    assert magics[0] == b"\x93NUMPY" and magics[1] == b"PK\x03\x04"   # numpy's and zip's published magic


def test_parser_on_the_constructs_it_allows():
    text = """-- a comment
    return { a = 1, [2] = 'two', 'first', nested = { 'x', "y\\n", { z = -1.5e3 } }, s = '\\27LJ\\\\' ; }"""
    assert parse(text) == {"a": 1, 2: "two", 1: "first", "nested": ["x", "y\n", {"z": -1500.0}],
                           "s": "\x1bLJ\\"}
    with pytest.raises(ValueError, match="expected 'return"):
        parse("{}")
    with pytest.raises(ValueError, match="unsupported escape"):
        parse(r"return { '\q' }")


def test_lua_and_python_share_the_limits():
    luabridge.require("torch")
    assert luabridge.eval("torch.File.maxDepth") == t7.MAX_DEPTH == 4096
    assert t7format.MAX_DIMS == 64 and t7format.MAX_INDEX == 2**53


def unknown_object(name: bytes) -> bytes:
    """A torch object of class `name` with an empty fields table."""
    return struct.pack("<ii", 4, 1) + struct.pack("<i", 3) + b"V 1" + struct.pack("<i", len(name)) + name \
        + struct.pack("<iii", 3, 2, 0)


NAMES = {b"Blah": True, b"my.pkg:Thing-2_x": True, b"a" * 256: True, b"a" * 257: False, b"": False,
         b"a b": False, b"a/b": False, b"caf\xc3\xa9": False, b"a\x00b": False, b"x+y": False}


@pytest.mark.parametrize("name", list(NAMES), ids=lambda n: repr(n[:12]))
def test_class_name_rule_is_the_same_in_both_readers(name):
    data = unknown_object(name)
    de = lua_fn("function(s) return torch.deserialize(s, 'binary', {unknownClasses = 'table'}) end")
    try:
        de(data)
        lua_ok = True
    except LuaError as e:
        assert "bad class name" in e.message
        lua_ok = False
    try:
        t7.read(io.BytesIO(data), unknownClasses="table")
        python_ok = True
    except t7.T7Error as e:
        assert "bad class name" in str(e)
        python_ok = False
    assert lua_ok == python_ok == NAMES[name]


REFERENCES = {
    # {1: a table at index 1, 2: a reference to it with type code 4}: kinds must match
    "kind": (struct.pack("<iii", 3, 1, 2) + struct.pack("<id", 1, 1) + struct.pack("<iii", 3, 2, 0)
             + struct.pack("<id", 1, 2) + struct.pack("<ii", 4, 2),
             r"bad reference 2: type code 4, but that object has type code 3"),
    # a new object must take the next index
    "order": (struct.pack("<iii", 3, 1, 1) + struct.pack("<id", 1, 1) + struct.pack("<iii", 3, 5, 0),
              r"bad reference 5: no object with that index has been read \(next new object: 2\)"),
    # nil and NaN keys are refused even when their value is nil
    "nan key": (struct.pack("<iii", 3, 1, 1) + struct.pack("<id", 1, float("nan")) + struct.pack("<i", 0),
                r"table key is (nil or nan|NaN)"),
}


@pytest.mark.parametrize("name", list(REFERENCES))
def test_both_readers_refuse(name):
    data, message = REFERENCES[name]
    with pytest.raises(LuaError, match=message):
        lua_fn("function(s) return torch.deserialize(s) end")(data)
    with pytest.raises(t7.T7Error, match=message):
        t7.read(io.BytesIO(data))


NUMBER_TOKENS = [("Float", b"1_0", False), ("Float", b"1.5\x00", False), ("Float", b"0x10", False),
                 ("Float", b"1e5", True), ("Float", b"-inf", True), ("Float", b"nan", True), ("Float", b".5", True),
                 ("Float", b"1.", True), ("Int", b"+5", True), ("Int", b"1.0", False), ("Int", b"2147483648", False),
                 ("Int", b"-2147483648", True), ("Long", b"9223372036854775807", True),
                 ("Long", b"-9223372036854775808", True), ("Long", b"9223372036854775808", False),
                 ("Short", b"32768", False), ("Short", b"-32768", True), ("Float", b"0b1", False),
                 ("Float", b"-0X1p4", False), ("Int", b"0x10", False), ("Int", b"1e5", False),
                 ("Long", b"00000000000000000001", True), ("Long", b"-0009223372036854775808", True),
                 ("Int", b"0" * 63 + b"7", True), ("Int", b"0" * 64 + b"7", False),
                 ("Float", b"1." + b"0" * 62, True), ("Float", b"1." + b"0" * 63, False)]


@pytest.mark.parametrize("kind, token, ok", NUMBER_TOKENS)
def test_ascii_numbers_follow_one_rule(kind, token, ok):
    """A storage of one element in ascii: the same tokens read in both readers (integers within
    their type's range, C's limits)."""
    name = b"torch.%sStorage" % kind.encode()
    data = b"4\n1\n3\nV 1\n%d\n%s\n1\n%s\n" % (len(name), name, token)
    de = lua_fn("function(s) return torch.deserialize(s, 'ascii') end")
    results = []
    for read in (lambda: de(data), lambda: t7.read(io.BytesIO(data), "ascii")):
        try:
            read()
            results.append(True)
        except (LuaError, t7.T7Error):
            results.append(False)
    assert results == [ok, ok]


@pytest.mark.parametrize("version, ok", [(b"V 1", True), (b"V 2.5", True), (b"V -3", True), (b"V 0x10", False),
                                         (b"V 1_0", False), (b"V inf", False), (b"V nan", False), (b"V  1", False)])
def test_class_versions_follow_one_rule(version, ok):
    """A version is "V " and a finite decimal number; anything else is read as the class name of a
    file from before versions, which a space makes a bad one."""
    data = struct.pack("<ii", 4, 1) + struct.pack("<i", len(version)) + version + struct.pack("<i", 4) + b"Blah" \
        + struct.pack("<iii", 3, 2, 0)
    de = lua_fn("function(s) local o = torch.deserialize(s, 'binary', {unknownClasses = 'table'}) "
                "return o.__version end")
    results = []
    for read in (lambda: de(data), lambda: t7.read(io.BytesIO(data), unknownClasses="table")["__version"]):
        try:
            results.append(read())
        except (LuaError, t7.T7Error) as e:
            assert "bad class name" in str(e)
            results.append(None)
    expected = float(version[2:]) if ok else None
    assert results == [expected, expected]
