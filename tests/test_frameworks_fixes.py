"""What Torch7 training frameworks and pure-Lua packages (tools/corpus/frameworks.toml) rely on.

torch.pointer(tensor), as luaT_lua_pointer (luaT.c): the address of the THTensor behind the
userdata, so the identity of one tensor object: unchanged by :set(), :resize() or new contents,
different for two tensors viewing the same storage (fmassa/optnet keys gradWeight tensors by it
across `m.gradWeight:set()` and back). Storages keep their data address."""
from __future__ import annotations

import pytest

import luabridge


def test_pointer_of_a_tensor_is_its_identity(lua):
    same_after_set, same_after_resize, views_differ, distinct, is_number = lua.execute("""
      local t = torch.DoubleTensor(4):fill(1)
      local p = torch.pointer(t)
      t:set()
      local after_set = torch.pointer(t)
      t:resize(3, 5)
      local after_resize = torch.pointer(t)
      local base = torch.FloatTensor(6)
      local a, b = base:narrow(1, 1, 3), base:narrow(1, 1, 3)
      return p == after_set, p == after_resize, torch.pointer(a) ~= torch.pointer(b),
             torch.pointer(torch.Tensor(2)) ~= torch.pointer(torch.Tensor(2)), type(p) == 'number'""")
    assert (same_after_set, same_after_resize, views_differ, distinct, is_number) == (True, True, True, True, True)


def test_pointer_keys_a_table_across_set_as_optnet_does(lua):
    """optnet's removeGradParams / addGradParams: key by torch.pointer(m.gradWeight), empty it with
    :set(), later look the same tensor up again and :set() it back onto a storage of the size kept."""
    restored, size = lua.execute("""
      require 'nn'
      local m = nn.Linear(3, 2)
      local keep = {}
      keep[torch.pointer(m.gradWeight)] = {size = m.gradWeight:storage():size(),
                                            stride = m.gradWeight:stride()}
      m.gradWeight:set()
      local info = keep[torch.pointer(m.gradWeight)]
      m.gradWeight:set(torch.DoubleTensor(info.size):storage(), 1, m.weight:size(), info.stride)
      return info ~= nil, m.gradWeight:nElement()""")
    assert (restored, size) == (True, 6)


def test_pointer_of_storages_tables_and_bad_input(lua):
    shared, apart, tables = lua.execute("""
      local s = torch.FloatStorage(4)
      local t1 = torch.FloatTensor(s)
      local t2 = torch.FloatTensor(s, 2, 2)
      local tb = {}
      return torch.pointer(t1:storage()) == torch.pointer(t2:storage()),
             torch.pointer(s) ~= torch.pointer(torch.FloatStorage(4)),
             torch.pointer(tb) == torch.pointer(tb) and torch.pointer(tb) ~= torch.pointer({})""")
    assert (shared, apart, tables) == (True, True, True)


def test_getmetatable_of_a_class_is_its_metatable_and_parents_chain(lua):
    """luaT_lua_newmetatable: the constructor table's metatable has __metatable = the class
    metatable, and the class metatable's metatable is the parent's (whose __metatable is itself).
    torch-autograd's nnwrapper relies on it: getmetatable(getmetatable(nn.SoftMax)).__typename is
    'nn.Module', so functionalize('nn') wraps every module and criterion."""
    got = lua.execute("""
      require 'nn'
      local mt = getmetatable(nn.SoftMax)
      local parent = getmetatable(mt)
      local crit = getmetatable(getmetatable(nn.MSECriterion))
      local grand = getmetatable(getmetatable(getmetatable(nn.Sequential)))
      return mt == torch.getmetatable('nn.SoftMax'), rawget(parent, '__typename'),
             rawget(crit, '__typename'), rawget(grand, '__typename'),
             getmetatable(nn.SoftMax()) == mt, getmetatable(torch.getmetatable('nn.Module')) == nil""")
    assert got == (True, "nn.Module", "nn.Criterion", "nn.Module", True, True)


def test_classes_stay_callable_and_typeless_as_in_luat(lua):
    """torch.typename reads the real metatable (luaT_typename's lua_getmetatable), so a class
    table has no type name; constructing, Class.new, isTypeOf with a class and torch.pointer of a
    class (whose metatable is now protected) behave as before; a quiet DiskFile still gives nil."""
    got = lua.execute("""
      require 'nn'
      local m = nn.Linear(2, 3)
      return torch.typename(nn.Linear), torch.type(nn.Linear), torch.type(m),
             torch.isTypeOf(m, nn.Module), torch.isTypeOf(nn.Linear, 'nn.Module'),
             torch.type(nn.Linear.new(2, 3)), type(torch.pointer(nn.Linear)) == 'number',
             torch.DiskFile('/nonexistent/luabridge-none', 'r', true) == nil""")
    assert got == (None, "table", "nn.Linear", True, False, "nn.Linear", True, True)


def test_a_class_reaches_python_as_a_callable(lua):
    linear = lua.eval("(require 'nn').Linear")
    m = linear(4, 2)
    assert lua.eval("torch.type")(m) == "nn.Linear"


def test_a_failed_require_cutorch_leaves_no_global(tmp_path):
    """Without a device (and without LUABRIDGE_CUDA_ON_CPU) require 'cutorch' fails, and the
    `cutorch` global stays nil, as under a Torch7 without cutorch: torch-autograd's tests skip
    their CUDA cases with `if not cutorch then return end`."""
    import os, subprocess, sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUABRIDGE_CUDA")}
    script = tmp_path / "c.lua"
    script.write_text("local ok = pcall(require, 'cutorch'); print(ok, rawget(_G, 'cutorch') == nil)\n")
    out = subprocess.run([sys.executable, "-m", "luabridge", "th", str(script)], capture_output=True,
                         text=True, timeout=60, env=env)
    try:
        import cupy  # noqa: F401
        pytest.skip("a CUDA device may be present")
    except ImportError:
        pass
    assert out.stdout.split() == ["false", "true"], out.stdout + out.stderr


def test_torch7_ffi_type_names_are_declared(lua):
    """torch7's FFInterface.lua cdefs THAllocator, TH<Real>Storage and TH<Real>Tensor when torch
    loads; nicholas-leonard/dp's utils/torch.lua declares `void THFloatStorage_free(THFloatStorage
    *self);` on top of them and casts to 'THFloatStorage*'. The names are those of t:cdata()."""
    got = lua.execute("""
      local ffi = require 'ffi'
      ffi.cdef 'void THFloatStorage_free(THFloatStorage *self); void THIntStorage_free(THIntStorage *self);'
      local t = torch.DoubleTensor(2, 3):fill(7)
      local c = ffi.cast('THDoubleTensor*', t:cdata())
      local s = ffi.cast('THDoubleStorage*', t:storage():cdata())
      return ffi.istype('THDoubleTensor', t:cdata()), c.nDimension, tonumber(c.size[1]), s.data[5],
             tonumber(ffi.sizeof('THAllocator')) == 3 * ffi.sizeof('void *')""")
    assert got == (True, 2, 3, 7.0, True)


def test_torch_zero_fill_numel_function_forms(lua):
    """TensorMath.lua wraps zero, fill and numel for both the method and torch.*: torch.zero(x)
    and torch.fill(x, v) work in place and return x, torch.numel(x) is the element count."""
    got = lua.execute("""
      local x = torch.FloatTensor(2, 3):fill(5)
      local z = torch.zero(x)
      local zsum, same = x:sum(), z == x
      local f = torch.fill(x, 1.5)
      return zsum, same, f == x, x:sum(), torch.numel(x)""")
    assert got == (0.0, True, True, 9.0, 6)
    with pytest.raises(luabridge.LuaError, match="zero"):
        lua.execute("torch.zero(3)")


def test_tensor_constructors_and_indexing_reach_no_torch_function(lua):
    """Under Torch7 tensor constructors and x[k] are C: replacing torch.isStorage (as
    torch-autograd does while tracing) changes nothing in them."""
    got = lua.execute("""
      local saved = torch.isStorage
      torch.isStorage = function() error('torch.isStorage called') end
      local ok, err = pcall(function()
        local a = torch.LongTensor{3, 1}
        local b = torch.Tensor(torch.LongStorage{2, 2}):fill(1)
        b[torch.LongStorage{1, 2}] = 4
        return a:sum() + b:sum() + b[torch.LongStorage{1, 2}]
      end)
      torch.isStorage = saved
      return ok, err""")
    assert got == (True, 4 + 7 + 4)
