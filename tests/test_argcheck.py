"""argcheck (lua/argcheck): torch/argcheck's documented behaviour -- ordered and named calls,
defaults (default, defaulta, defaultf), opt, check, pack, quiet, call, overload, named method
calls, torch type patterns, nonamed / noordered, the usage text, argcheck.doc, and overloads
that overlap an older one (an error unless force)."""
from __future__ import annotations

import pytest

import luabridge
from lua_json import runner


@pytest.fixture(scope="module")
def run():
    return runner("require 'nn'; local argcheck = require 'argcheck'")


ADD = """local check = argcheck{help = 'Adds five.',
  {name = 'x', type = 'number', default = 0, help = 'the age of the captain'},
  {name = 'msg', type = 'string', help = 'a message'}}"""


def test_ordered_named_and_defaults(run):
    got = run(ADD + """
      return {{check(4, 'hi')}, {check('hi')}, {check{x = 2, msg = 'n'}}, {check{msg = 'm'}}}""")
    assert got == [[4, "hi"], [0, "hi"], [2, "n"], [0, "m"]]


@pytest.mark.parametrize("call", ["check(4)", "check()", "check('a', 'b')", "check{x = 1}", "check{msg = 'm', y = 2}"])
def test_mismatches_show_the_usage(run, call):
    with pytest.raises(luabridge.LuaError) as e:
        run(ADD + f"; return {{{call}}}")
    assert ("Adds five.\narguments:\n{\n  [x   = number]  -- the age of the captain [default=0]\n"
            "   msg = string   -- a message\n}\ninvalid arguments!") in str(e.value)


def test_defaulta_defaultf_opt_check_pack(run):
    got = run("""
      local mul = argcheck{{name = 'x', type = 'number'}, {name = 'y', type = 'number', defaulta = 'x'},
                           call = function(x, y) return x * y end}
      local n = 0
      local counter = argcheck{{name = 'y', type = 'number', defaultf = function() n = n + 1 return n end}}
      local ranged = argcheck{quiet = true, {name = 'x', type = 'number', check = function(x) return x >= 1 and x <= 10 end}}
      local packed = argcheck{pack = true, {name = 'x', type = 'number'}, {name = 'm', type = 'string', opt = true}}
      local p = packed(3)
      return {mul(3, 4), mul(3), mul{x = 5}, counter(), counter(), counter(9), (ranged(3)), (ranged(11)),
              p.x, p.m == nil, packed(1, 'z').m}""")
    assert got == [12, 9, 25, 1, 2, 9, True, False, 3, True, "z"]


def test_overload_and_method_calls(run):
    got = run("""
      local add5 = argcheck{{name = 'x', type = 'number'}, call = function(x) return x + 5 end}
      add5 = argcheck{{name = 'str', type = 'string'}, overload = add5, call = function(s) return s .. '5' end}
      local obj = {checksum = 1234567}
      obj.foobar = argcheck{{name = 'self', type = 'table'}, {name = 'x', type = 'number'},
                            {name = 'msg', type = 'string', default = 'i know what i am doing'},
                            call = function(self, x, msg) return {self.checksum, x, msg} end}
      local ok, err = pcall(add5)
      return {add5(5), add5('hi'), ok, err:find('str = string', 1, true) ~= nil and err:find('\\n\\nor\\n\\n') ~= nil,
              obj:foobar(5, 'hello'), obj:foobar{x = 7}}""")
    assert got == [10, "hi5", False, True, [1234567, 5, "hello"], [1234567, 7, "i know what i am doing"]]


def test_torch_types_and_call_forms(run):
    got = run("""
      local t = argcheck{quiet = true, {name = 'any', type = 'torch.*Tensor'}, {name = 'f', type = 'torch.FloatTensor'}}
      local named = argcheck{nonamed = true, quiet = true, {name = 't', type = 'table'}}
      local ordered = argcheck{noordered = true, quiet = true, {name = 'x', type = 'number'}}
      local mod = argcheck{quiet = true, {name = 'm', type = 'nn.Module'}}
      return {(t(torch.IntTensor(), torch.FloatTensor())), (t(torch.FloatTensor(), torch.IntTensor())),
              (named({x = 1})), (ordered(1)), (ordered{x = 1}), (mod(nn.Linear(2, 2))), (mod({}))}""")
    assert got == [True, False, True, False, True, True, False]


def test_doc_records(run):
    got = run("""
      local doc = require 'argcheck.doc'
      doc.record()
      doc[[# title]]
      argcheck{doc = ' and a function', {name = 'x'}}
      local text = doc.stop()
      doc('dropped')
      return {text, doc.stop()}""")
    assert got == ["# title and a function", ""]


def test_overloads_that_overlap_need_force(run):
    got = run("""
      local add = argcheck{{name = 'x', type = 'number'}, call = function(x) return 'one ' .. x end}
      add = argcheck{{name = 's', type = 'string'}, overload = add, call = function(s) return 'str ' .. s end}
      local ok, err = pcall(argcheck, {{name = 'x', type = 'number'}, {name = 'msg', type = 'string', default = 'd'},
                                       overload = add, call = function(x, m) return 'two ' .. x .. m end})
      local forced = argcheck{{name = 'x', type = 'number'}, {name = 'msg', type = 'string', default = 'd'},
                              overload = add, force = true, call = function(x, m) return 'two ' .. x .. m end}
      return {ok, err, forced(5), forced(5, 'm'), forced('s')}""")
    ok, err, *calls = got
    # (number) is what add(5) and the new rules (msg left to its default) both accept
    assert ok is False and "argcheck: rules led to ambiguous situations: (number) is accepted" in err
    assert calls == ["two 5d", "two 5m", "str s"]    # forced: the new rules win, the older ones remain
