"""torch7 behaviours that real programs relied on and our torch lacked (found by
tools/real_programs.py): torchnet's class test through the Lua registry, its static
`Storage.elementSize()`, `deserializeFromStorage` of a CharTensor and `torch.range(..., typeName)`;
OpenFace's `torch.totable`. Expected values come from torch7's documented semantics."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from helpers import lua_fn


def test_storage_element_size_on_the_class_and_on_instances(lua):
    sizes = lua_fn("""function()
      return {torch.LongStorage.elementSize(), torch.FloatStorage.elementSize(),
              torch.ByteStorage.elementSize(), torch.DoubleStorage(3):elementSize()}
    end""")()
    assert list(sizes.values()) == [8, 4, 1, 8]


def test_deserialize_from_a_char_tensor_contiguous_or_strided(lua):
    got = lua_fn("""function()
      local obj = {x = torch.range(1, 4), name = 'abc'}
      local bytes = torch.serializeToStorage(obj)
      local flat = torch.deserializeFromStorage(torch.CharTensor(bytes))
      -- the same bytes in every other element of a larger tensor: a strided view
      local wide = torch.CharTensor(bytes:size(), 2):zero()
      wide:select(2, 1):copy(torch.CharTensor(bytes))
      local strided = torch.deserializeFromStorage(wide:select(2, 1))
      return {flat.x:sum(), flat.name, strided.x:sum(), strided.name}
    end""")()
    assert list(got.values()) == [10.0, "abc", 10.0, "abc"]
    with pytest.raises(luabridge.LuaError, match="CharStorage expected, got torch.ByteTensor"):
        lua_fn("function() return torch.deserializeFromStorage(torch.ByteTensor(3)) end")()


def test_classes_are_in_the_lua_registry_as_luaT_keeps_them(lua):
    # torchnet's torch.isclass: debug.getregistry()[obj] is set for class metatables only
    got = lua_fn("""function()
      require 'nn'
      local reg = debug.getregistry()
      torch.class('gapsTest.Thing')
      return {reg[getmetatable(nn.Linear)], reg[torch.getmetatable('nn.Linear')],
              reg[getmetatable(gapsTest.Thing)], reg[getmetatable(gapsTest.Thing())], reg[{}] == nil,
              reg[getmetatable(setmetatable({}, {}))] == nil}
    end""")()
    assert list(got.values()) == ["nn.Linear", "nn.Linear", "gapsTest.Thing", "gapsTest.Thing", True, True]


def test_totable_of_tensors_and_storages(lua):
    got = lua_fn("""function()
      return {torch.totable(torch.LongStorage{3, 96, 96}), torch.totable(torch.Tensor{{1, 2}, {3, 4}})}
    end""")()
    assert [list(got[1].values()), [list(r.values()) for r in got[2].values()]] == [[3, 96, 96], [[1, 2], [3, 4]]]
    with pytest.raises(luabridge.LuaError, match="torch.totable: expected a tensor or a storage, got table"):
        lua_fn("function() return torch.totable({1}) end")()


@pytest.mark.parametrize("call, kind, values", [
    ("torch.range(1, 4, 'torch.FloatTensor')", "torch.FloatTensor", [1, 2, 3, 4]),
    ("torch.range(2, 8, 3, 'torch.IntTensor')", "torch.IntTensor", [2, 5, 8]),
    ("torch.zeros(3, 'torch.LongTensor')", "torch.LongTensor", [0, 0, 0]),
    ("torch.ones(2, 'torch.ByteTensor')", "torch.ByteTensor", [1, 1]),
    ("torch.linspace(0, 1, 5, 'torch.FloatTensor')", "torch.FloatTensor", [0, 0.25, 0.5, 0.75, 1]),
    ("torch.range(1, 2)", "torch.DoubleTensor", [1, 2]),
])
def test_a_last_type_name_argument_gives_the_result_type(lua, call, kind, values):
    t, name = lua_fn(f"function() local t = {call}; return t, torch.type(t) end")()
    assert name == kind
    np.testing.assert_array_equal(luabridge.to_numpy(t), np.array(values))


def test_a_string_that_is_no_tensor_type_is_still_an_error(lua):
    with pytest.raises(luabridge.LuaError, match="zeros"):
        lua_fn("function() return torch.zeros(2, 'torch.NoSuchTensor') end")()
