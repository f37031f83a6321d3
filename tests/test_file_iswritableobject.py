"""File:isWritableObject, as torch7's File.lua: the type code writeObject would write for a value
(nil 0, number 1, string 2, table 3, torch object 4, boolean 5, a Lua function the code
writeObject puts before it), nothing for what cannot be written (a coroutine). classic.torch's
Object:write asks it which fields to keep.
"""
import pytest

from helpers import lua_fn


@pytest.fixture(scope="module")
def code(lua):
    return lua_fn("""function(expr)
      local v = loadstring('return ' .. expr)()
      local f = torch.MemoryFile()
      return f:isWritableObject(v)
    end""")


@pytest.mark.parametrize("expr,want", [
    ("nil", 0), ("3.5", 1), ("'s'", 2), ("{1, 2}", 3), ("torch.Tensor(2)", 4), ("nn and nil or torch.LongStorage(1)", 4),
    ("false", 5), ("true", 5), ("coroutine.create(function() end)", None),
])
def test_codes(code, expr, want):
    assert code(expr) == want


def test_function_code_is_what_writeobject_writes():
    got = lua_fn("""function()
      local fn = function(x) return x + 1 end
      local f = torch.MemoryFile():binary()
      local c = f:isWritableObject(fn)
      f:writeObject(fn)
      f:seek(1)
      return c, f:readInt()
    end""")()
    assert got[0] == got[1] and got[0] in (6, 8)
