"""torch.memory.reuse: a runtime that turns it on (threads' pool workers do) keeps released
buffers in Lua and hands them out again without a Python call, but only those that Python finds
referenced by nothing else (BufferRegistry.release's keep): a numpy view or another runtime
holding a buffer keeps it from being reused. Each case runs in a thread of its own, so in a
runtime of its own."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from helpers import in_fresh_thread

from luabridge.core.runtime import bridge

SETUP = """
require 'torch'
local memory = require 'torch.core.memory'
local py = __luabridge_py
calls = 0
local alloc = py.alloc
py.alloc = function(...) calls = calls + 1; return alloc(...) end
function collect() for _ = 1, 3 do collectgarbage() end; memory.flush() end
"""


def in_own_runtime(fn: Callable[[Any], Any]) -> Any:
    """fn(bridge) in a new thread (a new runtime) set up by SETUP; its result, or its exception."""
    def run() -> Any:
        b = bridge()
        b.lua.execute(SETUP)
        return fn(b)
    return in_fresh_thread(run)


def test_a_released_buffer_is_reused_zeroed_without_python():
    def case(b):
        lua = b.lua
        first = lua.execute("require('torch.core.memory').reuse(1e8); local t = torch.DoubleTensor(20000):fill(7)"
                            "; local id = t:storage()._id; t = nil; collect(); calls = 0; return id")
        again = lua.execute("local t = torch.DoubleTensor(20000); keep = t; return t:storage()._id, calls, t:sum(), t:max()")
        other = lua.execute("local t = torch.FloatTensor(20000); return t:storage()._id, calls")
        return first, again, other
    first, (again, calls, total, top), (other, other_calls) = in_own_runtime(case)
    assert again == first and calls == 0 and total == 0 and top == 0   # the same buffer, zeroed, no call
    assert other != first and other_calls == 1                          # another type: a new one


def test_a_buffer_python_still_references_is_not_reused():
    def case(b):
        lua = b.lua
        t = lua.execute("require('torch.core.memory').reuse(1e8); local t = torch.DoubleTensor(20000):fill(7); return t")
        view = b.buffers.tensor_view(t)        # numpy's view keeps the buffer
        first = t.storage(t)._id
        t = None
        lua.execute("collect(); calls = 0")
        again, calls = lua.execute("local t = torch.DoubleTensor(20000); keep = t; return t:storage()._id, calls")
        return first, again, calls, view
    first, again, calls, view = in_own_runtime(case)
    assert again != first and calls == 1
    assert (view == 7).all()                   # nothing wrote into the viewed buffer


def test_the_limit_and_turning_it_off_release_the_kept_buffers():
    def case(b):
        lua = b.lua
        base = len(b.buffers)
        lua.execute("require('torch.core.memory').reuse(200000); local a, c = torch.DoubleTensor(20000), torch.DoubleTensor(20000)"
                    "; a, c = nil, nil; collect()")
        kept = len(b.buffers) - base           # 160 KB each: one fits the 200 KB limit
        lua.execute("require('torch.core.memory').reuse(0); collect()")
        return kept, len(b.buffers) - base
    kept, after = in_own_runtime(case)
    assert kept == 1 and after == 0


@pytest.mark.parametrize("serialization", ["threads.serialize", "threads.sharedserialize"])
def test_results_sent_to_another_runtime_are_never_reused_under_it(serialization):
    """A pool worker's result storages go to the caller's runtime as views (with sharedserialize,
    the worker's own tensor): the worker may not hand them out again while the caller holds
    them, however often it collects."""
    lua = bridge().lua
    ok = lua.execute("""
      local threads = require 'threads'
      local before = threads.Threads.serialization()
      threads.Threads.serialization(...)
      local pool = threads.Threads(1, function()
        local py = __luabridge_py
        local alloc = py.alloc
        calls = 0
        py.alloc = function(...) calls = calls + 1; return alloc(...) end
      end)
      local got = {}
      for i = 1, 12 do
        pool:addjob(function(k)
          local t = torch.FloatTensor(30000):fill(k)
          for _ = 1, 3 do collectgarbage() end
          require('torch.core.memory').flush()
          return t, calls
        end, function(t, n) got[#got + 1] = {t, n} end, i)
        pool:synchronize()
      end
      pool:terminate()
      threads.Threads.serialization(before)
      local ok = #got == 12
      for i, r in ipairs(got) do ok = ok and r[1]:min() == i and r[1]:max() == i end
      return ok
    """, serialization)
    assert ok


def test_pool_workers_reuse_their_buffers():
    lua = bridge().lua
    calls = lua.execute("""
      local threads = require 'threads'
      local pool = threads.Threads(1, function()
        local py = __luabridge_py
        local alloc = py.alloc
        calls = 0
        py.alloc = function(...) calls = calls + 1; return alloc(...) end
      end)
      local n
      pool:addjob(function()
        local before = calls
        for i = 1, 100 do
          local t = torch.FloatTensor(3, 100, 100):fill(i)
          if i % 10 == 0 then for _ = 1, 3 do collectgarbage() end end
        end
        return calls - before
      end, function(c) n = c end)
      pool:synchronize()
      pool:terminate()
      return n
    """)
    assert calls <= 12   # 100 tensors of 120 KB: new ones only until the first collection
