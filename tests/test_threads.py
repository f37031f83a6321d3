"""threads (lua/threads): the pool API of torch/threads with jobs run in order on the calling
thread -- job results, order and thread ids against values computed here, init functions and
their results, queue bookkeeping (acceptsjob, hasjob, addjob on a full queue), specific mode,
errors, serialize / sharedserialize, Mutex and safe, and the data-loader patterns of
dcgan.torch and fb.resnet.torch. In a runtime of its own (jobs set globals)."""
from __future__ import annotations

import pytest

import luabridge
from lua_json import fresh_runner


@pytest.fixture(scope="module")
def run():
    yield from fresh_runner("local threads = require 'threads'")


def test_jobs_run_in_order_with_their_results(run):
    got = run("""
      local pool = threads.Threads(3)
      local log = {}
      for i = 1, 8 do
        pool:addjob(function(x, y) return x * y, __threadid end,
                    function(prod, tid) log[#log + 1] = {i, prod, tid} end, i, i + 1)
      end
      pool:synchronize()
      pool:terminate()
      return log""")
    assert got == [[i, i * (i + 1), (i - 1) % 3 + 1] for i in range(1, 9)]


def test_init_functions_run_once_per_thread(run):
    got = run("""
      local seen = {}
      local pool, inits = threads.Threads(4,
        function(id) seen[#seen + 1] = 'a' .. id end,
        function(id) seen[#seen + 1] = 'b' .. id; return id * id, __threadid end)
      pool:terminate()
      return {seen, inits, __threadid == nil}""")
    assert got[0] == [f"a{i}" for i in range(1, 5)] + [f"b{i}" for i in range(1, 5)]
    assert got[1] == [[i * i, i] for i in range(1, 5)]
    assert got[2] is True


def test_queue_bookkeeping(run):
    got = run("""
      local pool = threads.Threads(2)
      local done = {}
      local r = {pool:acceptsjob(), pool:hasjob()}
      for i = 1, 2 do pool:addjob(function() return i end, function(v) done[#done + 1] = v end) end
      r[#r + 1] = pool:acceptsjob(); r[#r + 1] = pool:hasjob(); r[#r + 1] = #done
      pool:addjob(function() return 3 end, function(v) done[#done + 1] = v end)   -- full: runs job 1 first
      r[#r + 1] = #done
      pool:dojob()
      r[#r + 1] = #done
      pool:synchronize()
      r[#r + 1] = done; r[#r + 1] = pool:hasjob()
      return r""")
    assert got == [True, False, False, True, 0, 1, 2, [1, 2, 3], False]


def test_specific_mode_names_the_thread(run):
    got = run("""
      local pool = threads.Threads(3)
      pool:specific(true)
      local ran = {}
      for _, id in ipairs({3, 1, 2, 3}) do
        pool:addjob(id, function(x) return __threadid, x end, function(t, x) ran[#ran + 1] = {t, x} end, id * 10)
      end
      pool:synchronize()
      local ok, err = pcall(pool.addjob, pool, 4, function() end)
      return {ran, pool:specific(), ok, err}""")
    assert got[0] == [[3, 30], [1, 10], [2, 20], [3, 30]]
    assert got[1:3] == [True, False] and "thread index (1..3) expected, got 4" in got[3]


@pytest.mark.parametrize("code, message", [
    ("p:addjob(function() error('boom') end); p:synchronize()", r"\[thread 1 callback\] .*boom"),
    ("p:addjob(function() return 1 end, function() error('late') end); p:synchronize()", r"\[thread 1 endcallback\] .*late"),
    ("p:dojob()", "no job queued"),
    ("p:addjob('x')", "function callback expected"),
    ("p:terminate(); p:addjob(function() end)", "thread system is not running"),
    ("threads.Threads(0)", "number of threads must be a positive integer, got 0"),
])
def test_errors(run, code, message):
    with pytest.raises(luabridge.LuaError, match=message):
        run(f"local p = threads.Threads(2); {code}")


def test_serialization_copies_or_shares(run):
    got = run("""
      local t = torch.Tensor{1, 2, 3}
      local obj = {t = t, n = 'x', f = function() return t end}
      local copy = require('threads.serialize').load(require('threads.serialize').save(obj))
      local shared = require('threads.sharedserialize').load(require('threads.sharedserialize').save(obj))
      threads.serialization('threads.sharedserialize')
      local name = threads.serialization()
      threads.serialization('threads.serialize')
      return {copy.t ~= t, copy.t:sum(), copy.f() == copy.t, shared.t == t, shared.f() == t, shared.n, name}""")
    assert got == [True, 6, True, True, True, "x", "threads.sharedserialize"]


def test_mutex_and_safe(run):
    got = run("""
      local m = threads.Mutex()
      m:lock()
      local ok = pcall(m.lock, m)
      m:unlock()
      local add = threads.safe(function(a, b) return a + b, a - b end)
      local failing = threads.safe(function() error('x') end, m)
      local failed = not pcall(failing)
      m:lock(); m:unlock()   -- safe unlocked it after the error
      return {ok, threads.Mutex(m:id()) == m, {add(5, 3)}, failed, (pcall(threads.Condition().wait, threads.Condition(), m))}""")
    assert got == [False, True, [8, 2], True, False]


def test_dcgan_style_loader(run, tmp_path):
    """dcgan.torch's data.lua: init functions set globals and dofile a donkey that makes a global
    trainLoader; getBatch queues a job and runs one. (tid, a global, is the last init's: 2.)"""
    donkey = tmp_path / "donkey.lua"
    donkey.write_text("trainLoader = {n = 0, size = function() return 100 end,\n"
                      "  sample = function(self, b) self.n = self.n + 1; return torch.Tensor(b):fill(self.n), tid end}\n")
    got = run("""
      local Threads = require 'threads'
      Threads.serialization('threads.sharedserialize')
      local donkeyFile, options = ..., {batchSize = 4}
      local pool = Threads(2, function() require 'torch' end,
                           function(idx) opt = options; tid = idx; paths.dofile(donkeyFile) end)
      local result, nSamples = {}, 0
      pool:addjob(function() return trainLoader:size() end, function(c) nSamples = c end)
      pool:synchronize()
      local function get() return trainLoader:sample(opt.batchSize) end
      local function push(...) result[1] = {...} end
      for _ = 1, 2 do pool:addjob(get, push) end
      local batches = {}
      for _ = 1, 5 do
        pool:addjob(get, push)
        pool:dojob()
        batches[#batches + 1] = {result[1][1]:totable(), result[1][2]}
      end
      return {nSamples, batches}""", str(donkey))
    assert got[0] == 100
    # the first getBatch finds the queue full (2 jobs): addjob runs sample 1 (overwritten), dojob
    # sample 2; from then on each getBatch queues one job and runs one
    assert [b[0] for b in got[1]] == [[float(n)] * 4 for n in range(2, 7)]
    assert [b[1] for b in got[1]] == [2] * 5


def test_fb_resnet_style_loop(run):
    """fb.resnet.torch's dataloader.lua: Threads(n, init, main) returning sizes, then a loop that
    fills the queue while acceptsjob() and takes one result per dojob()."""
    got = run("""
      local Threads = require 'threads'
      local dataset = {size = function() return 10 end, get = function(_, i) return i * 100 end}
      local pool, sizes = Threads(3, function() require 'torch' end,
                                  function(idx) _G.dataset = dataset; return dataset:size() end)
      local size, batchSize = sizes[1][1], 4
      local perm = torch.randperm(size)
      local idx, sample = 1, nil
      local function enqueue()
        while idx <= size and pool:acceptsjob() do
          local indices = perm:narrow(1, idx, math.min(batchSize, size - idx + 1))
          pool:addjob(function(ind)
              local out = {}
              for i, j in ipairs(ind:totable()) do out[i] = _G.dataset:get(j) end
              return out
            end, function(s) sample = s end, indices)
          idx = idx + batchSize
        end
      end
      local seen = {}
      while true do
        enqueue()
        if not pool:hasjob() then break end
        pool:dojob()
        for _, v in ipairs(sample) do seen[#seen + 1] = v end
      end
      table.sort(seen)
      return {size, perm:totable(), seen}""")
    size, perm, seen = got
    assert size == 10 and sorted(perm) == list(range(1, 11))
    assert seen == [i * 100 for i in range(1, 11)]
