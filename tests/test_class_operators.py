"""torch.class operators as luaT's: each metamethod looks its hook (__call__, __add__, __eq__, ...)
up in the instance's metatable and the parents' (lua_getfield on the metatable), never through
the instance, so a class whose metatable has its own __index still finds them (deepmind/classic's
torch.Object); without a hook luaT's message ("X has no call operator"), and == is raw equality.
The expected values are plain arithmetic on the fields the test sets.
"""
import pytest

from helpers import lua_fn


def run(src: str):
    return lua_fn("function() " + src + " end")()


def test_hooks_found_past_a_custom_index():
    got = run("""
      local C = torch.class('opsTestA')
      function C:__init(v) rawset(self, 'v', v) end
      C.__index = function(self, k) if k == '__init' then return C.__init end end  -- as classic's
      function C:__call__(x) return rawget(self, 'v') + x end
      function C.__add__(a, b) return rawget(a, 'v') * 10 + rawget(b, 'v') end
      function C.__unm__(a) return -rawget(a, 'v') end
      local a, b = opsTestA(2), opsTestA(3)
      return {a(5), a + b, -a}""")
    assert list(got.values()) == [7, 23, -2]


def test_inherited_hooks_and_eq():
    got = run("""
      local P = torch.class('opsTestP')
      function P:__init(v) self.v = v end
      function P.__eq__(a, b) return a.v == b.v end
      function P.__lt__(a, b) return a.v < b.v end
      function P.__le__(a, b) return a.v <= b.v end
      function P.__mod__(a, b) return a.v % b.v end
      function P.__pow__(a, b) return a.v ^ b.v end
      local K = torch.class('opsTestK', 'opsTestP')
      local x, y, z = opsTestK(2), opsTestK(2), opsTestK(5)
      return {x == y, x == z, x < z, z <= x, z % x, x ^ z}""")
    assert list(got.values()) == [True, False, True, False, 1, 32]


def test_defaults():
    got = run("""
      local Q = torch.class('opsTestQ')
      local a, b = opsTestQ(), opsTestQ()
      local function err(f) local ok, e = pcall(f) return ok and 'ok' or e:gsub('^.-: ', '') end
      return {a == a, a == b, err(function() return a() end), err(function() return a + b end),
              err(function() return a < b end), err(function() return -a end)}""")
    assert list(got.values()) == [True, False, "opsTestQ has no call operator", "opsTestQ has no addition operator",
                                  "opsTestQ has no lower than operator", "opsTestQ has no negation operator"]
