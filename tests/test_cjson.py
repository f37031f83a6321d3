"""The Lua cjson module against Python's json: what it encodes Python reads back equal, and what
Python writes it decodes equal; lua-cjson's conventions (null, sparse arrays, errors)."""
from __future__ import annotations

import json
import math

import pytest

import luabridge

DOCS = [
    {"idx_to_token": {"1": "a", "2": "é", "3": "\n"}, "token_to_idx": {"a": 1, "é": 2}},
    [1, 2.5, -300.0, 1e-7, 123456789012, [0], {"k": [True, False]}],   # [] would come back {}, as in lua-cjson
    {"nested": {"deeper": {"list": [[1, [2, [3]]]]}}, "quote": "say \"hi\" \\ / \t \u0001"},
    "just a string \u2603 \U0001F600",
    -0.5,
]


@pytest.fixture(scope="module")
def cjson():
    luabridge.require("torch")
    return luabridge.eval("require 'cjson'")


@pytest.mark.parametrize("doc", DOCS)
def test_python_json_round_trips_through_lua(cjson, doc):
    text = json.dumps(doc, ensure_ascii=False)
    again = cjson.encode(cjson.decode(text))
    assert json.loads(again) == doc
    escaped = json.dumps(doc, ensure_ascii=True)   # \uXXXX escapes and surrogate pairs
    assert json.loads(cjson.encode(cjson.decode(escaped))) == doc


def test_lua_values_encode_as_lua_cjson(cjson):
    enc = luabridge.eval("""function()
      local c = require 'cjson'
      return c.encode({1, 2, 3}), c.encode({}), c.encode('a/b'), c.encode({x = c.null}), c.encode(0.1),
             c.encode(1/3), c.encode({[1] = 'a', [2] = 'b', [4] = 'd'})
    end""")()
    assert enc[:5] == ("[1,2,3]", "{}", '"a\\/b"', '{"x":null}', "0.1")
    assert float(enc[5]) == pytest.approx(1 / 3, rel=1e-13) and len(enc[5]) == len("0.33333333333333")
    assert json.loads(enc[6]) == ["a", "b", None, "d"]        # a hole within the sparse ratio is null


def test_null_and_numbers_decode(cjson):
    got = luabridge.eval("""function()
      local c = require 'cjson'
      local t = c.decode('[null, 1e3, -2.5E-1, 0]')
      return t[1] == c.null, t[2], t[3], t[4], #t
    end""")()
    assert got == (True, 1000, -0.25, 0, 4)


@pytest.mark.parametrize("code, message", [
    ("c.decode('[1, 2')", "Expected comma or array end but found T_END at character 6"),
    ("c.decode('{\"a\" 1}')", "Expected colon but found invalid token at character 6"),
    ("c.decode('[1] x')", "Expected the end but found invalid token at character 5"),
    ("c.encode({[1] = 1, [100] = 2})", "Cannot serialise table: excessively sparse array"),
    ("c.encode(function() end)", "Cannot serialise function: type not supported"),
    ("c.encode(0/0)", "Cannot serialise number: must not be NaN or Inf"),
    ("c.decode(3)", "bad argument #1 to 'decode' (string expected, got number)"),
])
def test_errors(cjson, code, message):
    with pytest.raises(luabridge.LuaError) as e:
        luabridge.execute(f"local c = require 'cjson' {code}")
    assert message in e.value.message


def test_safe_variant_returns_nil_and_message(cjson):
    v, msg = luabridge.eval("function() return require('cjson.safe').decode('[') end")()
    assert v is None and "T_END" in msg
    assert math.isinf(luabridge.eval("require('cjson').decode('[-Infinity]')")[1])
