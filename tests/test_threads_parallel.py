"""The threads package (lua/threads, luabridge/threads.py): pools of OS threads, each worker with
a Lua runtime of its own. Expected values are computed here with plain Python / numpy; each
scenario runs in a runtime of its own with a bounded wait, so a hang fails instead of stalling."""
from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import numpy as np
import pytest

import luabridge
from helpers import load_bench, lua_fn
from lua_json import _call

WAIT_S = 120


def pool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("luabridge-threads-", "luabridge-thread"))]


@pytest.fixture(scope="module")
def run() -> Iterator[Any]:
    executor = ThreadPoolExecutor(max_workers=1)
    prelude = "local threads = require 'threads'; local ffi = require 'ffi'"
    yield lambda body, *args: executor.submit(_call, prelude, body, args).result(timeout=WAIT_S)
    executor.shutdown()


@pytest.fixture(autouse=True)
def no_thread_left(run: Any) -> Iterator[None]:
    """No worker thread the test started outlives it (workers of other tests' pools, not yet
    collected in their runtimes, are not this test's)."""
    before = set(pool_threads())
    yield
    run("for _ = 1, 3 do collectgarbage() end; return true")   # pools a failed test left
    # the teams of workers the runner's own runtime keeps for threaded passes (max pooling of a
    # training loop fed by a pool; products on a second thread), which would last as long as the
    # runner: ended and waited for (what luabridge.stop_workers() runs in the runner's thread)
    run("local p = package.loaded['threads.pthread']; if p then p.stopAll() end; return true")
    gc.collect()
    assert [t for t in pool_threads() if t not in before] == []


# pthread_self() as a number: which OS thread Lua runs on
SELF = """
  local function osThread()
    local ffi = require 'ffi'
    pcall(ffi.cdef, 'unsigned long pthread_self(void);')
    return tonumber(ffi.C.pthread_self())
  end
"""


def test_workers_are_os_threads_with_their_own_globals(run):
    got = run(SELF + """
      local pool, inits = threads.Threads(3, function(id) mine = id * 100; return id end)
      local rows = {}
      pool:specific(true)
      for id = 1, 3 do
        local main = osThread()
        pool:addjob(id, function() return __threadid, mine, osThread() end,
                    function(tid, m, os) rows[#rows + 1] = {tid, m, os ~= main, osThread() == main} end)
      end
      pool:synchronize()
      pool:terminate()
      return {rows, inits, mine == nil and __threadid == nil}""")
    rows, inits, main_untouched = got
    assert sorted(r[:2] for r in rows) == [[1, 100], [2, 200], [3, 300]]
    assert all(r[2] is True and r[3] is True for r in rows)   # jobs off, endcallbacks on the main thread
    assert sorted(i[0] for i in inits) == [1, 2, 3]
    assert main_untouched is True


def test_workers_run_on_distinct_os_threads(run):
    got = run(SELF + """
      local pool = threads.Threads(2)
      pool:specific(true)
      local os = {}
      for id = 1, 2 do pool:addjob(id, osThread, function(t) os[id] = t end) end
      pool:synchronize()
      pool:terminate()
      return os[1] ~= os[2]""")
    assert got is True


DATASET_MODULE = """
local Dataset = torch.class('ToyDataset')
-- sample i: the 2x2 image (1, 2; 3, 4) + 10 i + base, its class i % 7 + 1
function Dataset:__init(n, base)
  self.images = torch.range(1, 4):repeatTensor(n, 1):add(torch.range(1, n):mul(10):add(base):view(n, 1):expand(n, 4))
end
function Dataset:size() return self.images:size(1) end
function Dataset:get(i)
  return { input = self.images:select(1, i):view(2, 2), target = i % 7 + 1 }
end
function Dataset:preprocess() return function(x) return x:clone():mul(2) end end
"""

# fb.resnet.torch's dataloader.lua, as it is copied into training scripts: one pool per split,
# each worker's init sets _G.dataset / _G.preprocess, jobs read them
LOADER = """
  local function Loader(n, base)
    local dataset = ToyDataset(n, base)
    local function init() require 'toydataset' end
    local function main(idx)
      torch.manualSeed(idx)
      _G.dataset = dataset
      _G.preprocess = dataset:preprocess()
      return dataset:size()
    end
    local pool, sizes = threads.Threads(2, init, main)
    return { pool = pool, size = sizes[1][1] }
  end
  local function run(loader, batchSize)
    local pool, size, idx, sample = loader.pool, loader.size, 1, nil
    local seen = {}
    local function enqueue()
      while idx <= size and pool:acceptsjob() do
        local indices = torch.range(idx, math.min(idx + batchSize - 1, size))
        pool:addjob(function(indices)
          local sz = indices:size(1)
          local batch, target = torch.FloatTensor(sz, 2, 2), torch.IntTensor(sz)
          for i, k in ipairs(indices:totable()) do
            local s = _G.dataset:get(k)
            batch[i]:copy(_G.preprocess(s.input))
            target[i] = s.target
          end
          return { input = batch, target = target }
        end, function(s) sample = s end, indices)
        idx = idx + batchSize
      end
    end
    while true do
      enqueue()
      if not pool:hasjob() then break end
      pool:dojob()
      for i = 1, sample.target:size(1) do
        seen[#seen + 1] = { sample.target[i], sample.input[i]:sum() }
      end
    end
    return seen
  end
"""


def test_two_pool_data_loader_reads_its_own_dataset(run, tmp_path):
    """The regression: with globals shared between pools, the training pool's jobs read the
    validation set (select: index 50 out of range for dimension 1 of size 40)."""
    (tmp_path / "toydataset.lua").write_text(DATASET_MODULE)
    got = run(f"""
      package.path = '{tmp_path}/?.lua;' .. package.path
      require 'toydataset'
      {LOADER}
      local train, val = Loader(50, 0), Loader(40, 1000)
      local a, b = run(train, 8), run(val, 8)
      train.pool:terminate(); val.pool:terminate()
      return {{a, b}}""")

    def expected(n: int, base: int) -> list[list[float]]:
        return [[i % 7 + 1, float(2 * (np.arange(1, 5) + 10 * i + base).sum())] for i in range(1, n + 1)]

    train, val = got
    assert sorted(train) == sorted(expected(50, 0))
    assert sorted(val) == sorted(expected(40, 1000))


def test_upvalues_travel_with_the_job_as_copies(run):
    got = run("""
      local scale, offsets = 3, {10, 20, 30}
      local function shift(x, k) return x * scale + offsets[k] end
      local pool = threads.Threads(2)
      local out = {}
      for k = 1, 3 do
        pool:addjob(function(x) offsets[k] = -1; return shift(x, k) end, function(v) out[k] = v end, k + 0.5)
      end
      pool:synchronize()
      pool:terminate()
      return {out, offsets}""")
    out, offsets = got
    # the job set offsets[k] = -1 in the table it shares with shift: one table in each worker
    assert out == [(k + 0.5) * 3 - 1 for k in (1, 2, 3)]
    assert offsets == [10, 20, 30]      # the workers changed their copies only


def test_shared_storages_are_the_same_memory(run):
    got = run("""
      local before = threads.Threads.serialization()
      threads.Threads.serialization('threads.sharedserialize')
      local pool = threads.Threads(2)
      threads.Threads.serialization(before)
      local t = torch.zeros(1000)
      local address = tonumber(ffi.cast('intptr_t', t:data()))
      local seen
      pool:specific(true)
      pool:addjob(1, function()
        t:add(torch.range(1, 1000))
        _G.kept = t:narrow(1, 501, 500)
        return tonumber(require('ffi').cast('intptr_t', t:data()))
      end, function(a) seen = a end)
      pool:synchronize()
      local sumMain = t:sum()
      t = nil
      collectgarbage(); collectgarbage(); collectgarbage()
      local later
      pool:addjob(1, function() return _G.kept:sum() end, function(s) later = s end)
      pool:synchronize()
      pool:terminate()
      return {seen == address, sumMain, later}""")
    same_memory, sum_main, later = got
    assert same_memory is True
    assert sum_main == float(np.arange(1, 1001).sum())
    assert later == float(np.arange(501, 1001).sum())   # the worker's view outlived main's tensor


@pytest.mark.parametrize("n", [10, 20000])   # bytes inline, and a storage moved as a fresh copy
def test_plain_serialization_copies_storages(run, n):
    got = run(f"""
      local pool = threads.Threads(1)
      local t = torch.zeros({n})
      local out = {{}}
      pool:addjob(function()
        t:fill(7)
        local r = torch.range(1, {n})
        _G.kept = r
        return t:sum(), r, r:narrow(1, 2, 3)       -- r and its view share one storage
      end, function(s, r, v) out = {{s, r, v}} end)
      pool:synchronize()
      local s, r, v = unpack(out)
      v:fill(-1)                                   -- writes r's storage, not the worker's
      local later
      pool:addjob(function() return _G.kept:sum() end, function(x) later = x end)
      pool:synchronize()
      pool:terminate()
      return {{s, t:sum(), r:sum(), r:storage() == v:storage(), later}}""")
    r = np.arange(1, n + 1, dtype=np.float64)
    worker_sum = r.sum()
    r[1:4] = -1
    assert got == [7.0 * n, 0.0, r.sum(), True, worker_sum]


def test_job_errors_raise_in_main_with_the_workers_traceback(run):
    got = run("""
      local pool = threads.Threads(2)
      pool:addjob(function()
        local function evil() error('bad input 7') end
        evil()
      end)
      local ok1, err1 = pcall(pool.synchronize, pool)
      pool:addjob(function() return 5 end, function(v) error('end got ' .. v) end)
      local ok2, err2 = pcall(pool.synchronize, pool)
      local sum = 0
      pool:addjob(function() return 10 end, function(v) sum = sum + v end)
      pool:synchronize()
      local ok3, err3 = pcall(pool.dojob, pool)
      pool:addjob(function() return coroutine.create(print) end)
      local ok4, err4 = pcall(pool.synchronize, pool)
      pool:terminate()
      local ok5, err5 = pcall(pool.addjob, pool, function() end)
      local ok6, err6 = pcall(threads.Threads, 0)
      return {ok1, err1, ok2, err2, sum, ok3, err3, ok4, err4, ok5, err5, ok6, err6}""")
    ok1, err1, ok2, err2, total, ok3, err3, ok4, err4, ok5, err5, ok6, err6 = got
    assert ok1 is False and err1.startswith("[thread ") and " callback] " in err1
    assert "bad input 7" in err1 and "in function 'evil'" in err1 and "stack traceback" in err1
    assert ok2 is False and " endcallback] " in err2 and "end got 5" in err2
    assert total == 10
    assert ok3 is False and "no job queued" in err3
    assert ok4 is False and "cannot send the results back" in err4 and "Unwritable object <thread>" in err4
    assert ok5 is False and "thread system is not running" in err5
    assert ok6 is False and "number of threads must be a positive integer, got 0" in err6


def test_unwritable_upvalue_fails_in_addjob(run):
    got = run("""
      local pool = threads.Threads(1)
      local co = coroutine.create(print)
      local ok, err = pcall(pool.addjob, pool, function() return co end)
      local stillRunning = pool:hasjob()
      pool:terminate()
      return {ok, err, stillRunning}""")
    ok, err, pending = got
    assert ok is False and "writeObject" in err and "thread" in err
    assert pending is False


def test_atomic_counter_mutex_and_condition_under_contention(run):
    got = run("""
      local tds = require 'tds'
      local before = threads.Threads.serialization()
      threads.Threads.serialization('threads.sharedserialize')
      local pool = threads.Threads(4)
      threads.Threads.serialization(before)
      local counter = tds.AtomicCounter()
      local total = torch.zeros(1)                -- shared, incremented under a mutex
      local m = threads.Mutex()
      local add = threads.safe(function() total[1] = total[1] + 1 end, m)
      for _ = 1, 4 do
        pool:addjob(function()
          for _ = 1, 10000 do counter:inc(); add() end
        end)
      end
      pool:synchronize()
      -- a Condition: every worker waits for a flag only main sets
      local c, flag = threads.Condition(), torch.zeros(1)
      local woke = 0
      pool:specific(true)
      for id = 1, 4 do
        pool:addjob(id, function()
          m:lock()
          while flag[1] == 0 do c:wait(m) end
          m:unlock()
          return __threadid
        end, function() woke = woke + 1 end)
      end
      m:lock(); flag[1] = 1; c:broadcast(); m:unlock()
      pool:synchronize()
      pool:terminate()
      return {counter:get(), total[1], woke}""")
    assert got == [4 * 10000, 4 * 10000, 4]


def test_thread_runs_code_in_its_own_runtime(run):
    got = run("""
      local m, c = threads.Mutex(), threads.Condition()
      local flag = torch.zeros(1)
      m:lock()
      local t = threads.Thread(string.format([[
        local threads = require 'threads'
        local m, c = threads.Mutex(%d), threads.Condition(%d)
        m:lock()
        done = (done or 0) + 1
        c:signal()
        m:unlock()
      ]], m:id(), c:id()))
      c:wait(m)
      m:unlock()
      t:free()
      return {done == nil}""")
    assert got == [True]


def test_endcallback_may_yield_from_a_coroutine(run):
    """torch/threads' test-threads-coroutine (which skips itself on 'Lua 5.1')."""
    got = run("""
      local pool = threads.Threads(1)
      local function loop()
        pool:addjob(function() return 1 end, coroutine.yield)
        pool:addjob(function() return 2 end, coroutine.yield)
        pool:synchronize()
      end
      local seen = {}
      for r in coroutine.wrap(loop) do seen[#seen + 1] = r end
      pool:terminate()
      return seen""")
    assert got == [1, 2]


def test_specific_mode_and_queue_capacity(run):
    got = run("""
      local pool = threads.Threads(3)
      local was = pool:specific()
      pool:specific(true)
      local ran = {}
      for _, id in ipairs({3, 1, 3, 2}) do
        pool:addjob(id, function(v) return __threadid, v end, function(t, v) ran[#ran + 1] = {t, v} end, id * 100)
      end
      pool:synchronize()
      local ok, err = pcall(pool.addjob, pool, 4, function() end)
      local okAccept, errAccept = pcall(pool.acceptsjob, pool)
      pool:specific(false)
      local now = pool:specific()
      pool:terminate()
      return {was, now, ran, ok, err, okAccept, errAccept}""")
    was, now, ran, ok, err, ok_accept, err_accept = got
    assert (was, now) == (False, False)
    assert sorted(map(tuple, ran)) == sorted([(3, 300), (1, 100), (3, 300), (2, 200)])
    assert ok is False and "thread index (1..3) expected, got 4" in err
    assert ok_accept is False and "thread index (1..3) expected, got nil" in err_accept


def test_terminate_runs_queued_jobs_then_joins(run):
    got = run("""
      local pool = threads.Threads(4)
      local n = 0
      for i = 1, 6 do pool:addjob(function() return i end, function(i) n = n + i end) end
      pool:terminate()
      return {n, pool:isrunning()}""")
    assert got == [sum(range(1, 7)), False]


def test_a_collected_pool_joins_its_threads(run):
    got = run("""
      local pool = threads.Threads(3)
      pool:addjob(function() return 1 end)
      pool = nil
      for _ = 1, 4 do collectgarbage() end
      return true""")
    assert got is True
    # no_thread_left checks that the three workers are gone


def test_serialize_modules_in_one_runtime(run):
    got = run("""
      local tds = require 'tds'
      local t = torch.Tensor{1, 2, 3}
      local counter = tds.AtomicCounter()
      counter:set(4)
      local obj = {t = t, f = function() return t:sum() end, c = counter}
      local serialize, shared = require 'threads.serialize', require 'threads.sharedserialize'
      local copy = serialize.load(serialize.save(obj))
      local same = shared.load(shared.save(obj))
      counter:inc()
      local function addr(x) return tonumber(ffi.cast('intptr_t', x:data())) end
      return {addr(copy.t) == addr(t), copy.t:totable(), copy.f(), copy.c:get(),
              addr(same.t) == addr(t), same.f(), same.c:get()}""")
    assert got == [False, [1, 2, 3], 6, 4, True, 6, 5]


def test_consumer_driven_loop_gets_every_batch(run):
    """torch/threads' test-threads-async pattern: fill the queue while acceptsjob(), dojob() one
    result per step and refill, until hasjob() is false."""
    got = run("""
      local pool = threads.Threads(3)
      local size, batchSize, nextIndex, sample = 10, 4, 1, nil
      local function enqueue()
        while nextIndex <= size and pool:acceptsjob() do
          pool:addjob(function(a, k) local t = {} for i = a, a + k - 1 do t[#t + 1] = i * i end return t end,
                      function(batch) sample = batch end, nextIndex, math.min(batchSize, size - nextIndex + 1))
          nextIndex = nextIndex + batchSize
        end
      end
      local batches = {}
      while true do
        enqueue()
        if not pool:hasjob() then break end
        pool:dojob()
        batches[#batches + 1] = sample
      end
      pool:terminate()
      return batches""")
    squares = [i * i for i in range(1, 11)]
    assert sorted(got) == sorted([squares[0:4], squares[4:8], squares[8:10]])


def test_python_endcallbacks_and_ctrl_c_in_one(lua):
    """An endcallback may be any callable (it runs here); a KeyboardInterrupt it raises (Ctrl-C
    in a callback) leaves dojob as itself, not as a job error, and the pool goes on."""
    got = []

    def stop(*_: Any) -> None:
        raise KeyboardInterrupt

    start = lua_fn("""function(record)
      interruptPool = require('threads').Threads(1)
      interruptPool:addjob(function() return 6 * 7, 'x' end, record)
      interruptPool:synchronize()
    end""")
    start(lambda *values: got.append(values))
    assert got == [(42, "x")]
    try:
        with pytest.raises(KeyboardInterrupt):
            lua_fn("function(stop) interruptPool:addjob(function() end, stop); interruptPool:synchronize() end")(stop)
        assert lua_fn("""function()
          local v
          interruptPool:addjob(function() return 5 end, function(x) v = x end)
          interruptPool:synchronize()
          return v, interruptPool:hasjob()
        end""")() == (5, False)
    finally:
        luabridge.execute("interruptPool:terminate(); interruptPool = nil")


def test_a_failing_init_raises_and_stops_the_workers(run):
    before = set(pool_threads())
    got = run("""
      collectgarbage('stop')   -- so that no collection of the pool is what stops its workers
      local ok, err = pcall(threads.Threads, 2, function(id) if id == 2 then error('no data for ' .. id) end end)
      collectgarbage('restart')
      return {ok, err}""")
    ok, err = got
    assert ok is False and "[thread 2 callback]" in err and "no data for 2" in err
    assert [t for t in pool_threads() if t not in before] == []


def test_workers_reuse_released_buffers_zeroed(run):
    """A worker keeps released buffers from 64 KiB up for the next allocation of that size (a
    loader's samples), and hands them out zeroed, as a new one."""
    got = run("""
      local pool = threads.Threads(1)
      pool:addjob(function()
        local ffi = require 'ffi'
        local function address(t) return tonumber(ffi.cast('intptr_t', t:data())) end
        local t = torch.FloatTensor(100000):fill(7)
        local before = address(t)
        t = nil
        for _ = 1, 3 do collectgarbage() end
        require('torch.core.memory').flush()
        local u = torch.FloatTensor(100000)
        return address(u) == before, u:sum(), u:max()
      end, function(...) got = {...} end)
      pool:synchronize()
      pool:terminate()
      return got""")
    assert got == [True, 0.0, 0.0]


def test_loader_bench_runs(run):
    """bench/threads_loader.py's pipeline (fb.resnet.torch's preprocessing through a pool, and a
    training loop fed by it) on a few samples; no timing."""
    bench_lua = load_bench("threads_loader.py", "bench_threads_loader").PIPELINE
    got = run(f"""
      local bench = loadstring({bench_lua!r})()
      return {{bench.load(2, 2, 2), bench.train(1, 1, 2), bench.load(0, 1, 2)}}""")
    assert len(got) == 3 and all(rate > 0 for rate in got)
