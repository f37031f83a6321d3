"""Small storages carved from a shared slab (torch.memory, memory.smallBytes): each keeps its
own values under collector storms, views of a carve and numpy views outlive the Lua storage,
a resize moves a carve out of its slab, and the carves of one slab never overlap."""
from __future__ import annotations

import gc

import numpy as np

import luabridge


def setup_module() -> None:
    luabridge.require("torch")


def test_small_storages_are_carved_and_disjoint() -> None:
    """Carves of several types side by side in one slab: each holds its own values."""
    values = luabridge.execute("""
      local small = require('torch.core.memory').smallBytes
      local kinds = { 'Byte', 'Short', 'Int', 'Long', 'Float', 'Double', 'Char' }
      local list, out = {}, {}
      for i = 1, 600 do
        local kind = kinds[i % #kinds + 1]
        local n = i % 5 + 1
        local s = torch[kind .. 'Storage'](n)
        assert(n * s:elementSize() <= small)
        for j = 1, n do assert(s[j] == 0, 'a carve was not zero') end
        s:fill(i % 100)
        list[i] = s
      end
      for _ = 1, 4 do collectgarbage() end
      for i = 1, 600 do
        for j = 1, #list[i] do out[#out + 1] = list[i][j] - i % 100 end
      end
      return torch.DoubleTensor(out):abs():max()""")
    assert values == 0


def test_views_of_a_carve_survive_gc_storms() -> None:
    """Storage and tensor views of a carved storage keep its slab after the storage and every
    other carve of that slab are collected and thousands more are made."""
    ok = luabridge.execute("""
      local views = {}
      for i = 1, 50 do
        local s = torch.DoubleStorage(4):fill(i)
        views[i] = { torch.DoubleStorage(s, 2, 3), torch.DoubleTensor(s):narrow(1, 3, 2) }
      end
      for round = 1, 20 do
        local junk = {}
        for j = 1, 400 do junk[j] = torch.LongStorage(j % 8 + 1):fill(-round) end
        collectgarbage(); collectgarbage()
      end
      for i = 1, 50 do
        local sv, tv = views[i][1], views[i][2]
        assert(sv[1] == i and sv[3] == i and tv[2] == i, 'a view of a carve lost its values')
        sv[3] = -i
        assert(tv[2] == -i, 'the storage view and the tensor view no longer share memory')
      end
      return true""")
    assert ok is True


def test_to_numpy_views_outlive_the_lua_storage() -> None:
    """A numpy view of a carved tensor keeps the slab's memory after Lua collects the tensor,
    its storage and the slab's handle; fresh carves never land on it."""
    arrays = []
    make = luabridge.eval("function(i) return torch.FloatTensor(3):fill(i) end")
    for i in range(200):
        arrays.append(luabridge.to_numpy(make(i + 1)))
    luabridge.execute("""
      for _ = 1, 6 do collectgarbage() end
      local fresh = {}
      for i = 1, 5000 do fresh[i] = torch.FloatStorage(3):fill(-1) end
      for _ = 1, 6 do collectgarbage() end""")
    gc.collect()
    got = np.stack(arrays).astype(np.float64)
    want = np.repeat(np.arange(1, 201, dtype=np.float64)[:, None], 3, axis=1)
    np.testing.assert_array_equal(got, want)
    arrays[7][1] = 42.0   # still writable memory of its own
    assert arrays[7][1] == 42.0 and arrays[8][1] == 9.0


def test_resize_moves_a_carve_out_of_its_slab() -> None:
    """Growing a carved storage past memory.smallBytes copies it into a buffer of its own: its
    old neighbours and the views of its old memory keep their values."""
    ok = luabridge.execute("""
      local small = require('torch.core.memory').smallBytes
      local a = torch.DoubleStorage(2):fill(5)
      local b = torch.DoubleStorage(2):fill(6)
      local oldView = torch.DoubleStorage(a, 1, 2)
      a:resize(small)   -- small doubles: 8x past the carving limit
      assert(a[1] == 5 and a[2] == 5 and a[3] == 0 and a[small] == 0)
      a:fill(7)
      assert(b[1] == 6 and b[2] == 6, 'a resized carve wrote over its neighbour')
      assert(oldView[1] == 5 and oldView[2] == 5, 'the old memory of a moved carve changed')
      local t = torch.DoubleTensor(a)
      assert(t:sum() == 7 * small)
      a:resize(1)       -- and back into a slab
      assert(a[1] == 7)
      return true""")
    assert ok is True
    arr = luabridge.to_numpy(luabridge.execute("""
      local s = torch.LongStorage({1, 2, 3})
      s:resize(40)
      return torch.LongTensor(s)"""))
    np.testing.assert_array_equal(arr, np.concatenate([[1, 2, 3], np.zeros(37)]))


def test_carving_off_gives_python_buffers() -> None:
    """memory.smallBytes = 0: every storage gets a Python buffer of its own, at offset 0."""
    offsets = luabridge.execute("""
      local memory = require 'torch.core.memory'
      local was = memory.smallBytes
      memory.smallBytes = 0
      local a, b = torch.LongStorage(2), torch.FloatStorage(1)
      memory.smallBytes = was
      -- carved again: consecutive 16-byte carves, unless c took the last of its slab
      local c, d = torch.LongStorage(2), torch.LongStorage(2)
      local next = (c._id == d._id and d._baseoff - c._baseoff == 2) or (c._id ~= d._id and d._baseoff == 0)
      return { a._baseoff, b._baseoff, a._id == b._id, next }""")
    assert [offsets[i] for i in range(1, 5)] == [0, 0, False, True]
