"""class (lua/class), torch's standalone class package: constructors, inheritance, type queries
and errors as torch/class documents them. In a runtime of its own (the class registry is global)."""
from __future__ import annotations

import pytest

import luabridge
from lua_json import fresh_runner


@pytest.fixture(scope="module")
def run():
    yield from fresh_runner("local class = require 'class'")


def test_classes_instances_and_inheritance(run):
    got = run("""
      local A = class('t.A')
      function A:__init(stuff) self.stuff = stuff end
      function A:run() return 'A:' .. self.stuff end
      local B, parent = class.new('t.B', 't.A')
      function B:__init(stuff) A.__init(self, stuff .. '!') end
      function B:run5() return self:run():rep(2) end
      local a, b, b2 = A('x'), B('y'), B.new('z')
      local empty = class.factory('t.B')
      return {a:run(), b:run(), b2:run5(), class.type(a), class.type(b), class.type(1), class.type(nil),
              class.istype(b, 't.A'), class.istype(a, 't.B'), class.istype(b, 't.B'), class.istype('s', 'string'),
              parent == class.metatable('t.A'), getmetatable(B) == class.metatable('t.B'),
              class.type(empty), empty.stuff == nil, rawget(_G, 't') == nil}""")
    assert got == ["A:x", "A:y!", "A:z!A:z!", "t.A", "t.B", "number", "nil",
                   True, False, True, True, True, True, "t.B", True, True]


def test_torch_typed_objects_compare_by_their_names(run):
    assert run("return {class.type(torch.Tensor()), class.istype(torch.Tensor(), 'torch.DoubleTensor')}") == \
        ["torch.DoubleTensor", True]


def test_ffi_ctypes_count_as_instances(run):
    assert run("""
      local ffi = require 'ffi'
      ffi.cdef 'typedef struct { int x; } class_test_point;'
      class.new('t.Point', ffi.typeof('class_test_point'))
      local p = ffi.new('class_test_point')
      return {class.type(p), class.istype(p, 't.Point')}""") == ["t.Point", True]


@pytest.mark.parametrize("code, message", [
    ("class('dup'); class('dup')", "class <dup> already exists"),
    ("class('orphan', 'nosuch')", "parent class <nosuch> does not exist"),
    ("class(3)", "class name \\(a string\\) expected"),
    ("class.factory('unknown')", "unknown class <unknown>"),
])
def test_errors(run, code, message):
    with pytest.raises(luabridge.LuaError, match=message):
        run(code)
