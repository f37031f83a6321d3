"""The torch distribution's helper packages: paths, sys, xlua, threads (lua/paths, lua/sys, lua/xlua,
lua/threads: its pool against a bounded-queue model and round robin, written here) and the
CUDA packages cutorch / cunn / cudnn without a GPU (LUABRIDGE_CUDA_ON_CPU=1)."""
from __future__ import annotations

import gc
import os
import sys as pysys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import luabridge
from luabridge.backend import cuda
from helpers import lua_fn
from lua_json import fresh_runner

L = lua_fn("""function(code, ...)
  require 'xlua'
  return loadstring(code)(...)
end""")


# ---- paths ----

def test_concat_makes_absolute_normalised_names(lua):
    cwd = os.getcwd()
    assert L("return paths.concat()") == cwd
    assert L("return paths.concat('a', '../b', './c/')") == os.path.normpath(os.path.join(cwd, "b", "c"))
    assert L("return paths.concat('x', '/abs//y', 'z/..', 'w')") == "/abs/y/w"
    assert L("return paths.concat('/', '..')") == "/"
    assert L("return paths.cwd()") == cwd


@pytest.mark.parametrize("name, base, base_no_suffix, dirname", [
    ("/a/b.lua", "b.lua", "b", "/a"),
    ("a/b/", "b", "b", "a"),
    ("file.lua", "file.lua", "file", "."),
    ("/top", "top", "top", "/"),
    ("/", "/", "/", "/"),
    ("a//b.lua.lua", "b.lua.lua", "b.lua", "a/"),
    (".lua", ".lua", ".lua", "."),
])
def test_basename_dirname(lua, name, base, base_no_suffix, dirname):
    assert L("local s = ...; return paths.basename(s), paths.basename(s, 'lua'), paths.basename(s, '.lua'), "
             "paths.dirname(s)", name) == (base, base_no_suffix, base_no_suffix, dirname)


def test_extname(lua):
    assert L("return paths.extname('a/b.tar.gz')") == "gz"
    assert L("return paths.extname('noext') == nil") is True


def test_file_and_directory_functions(lua, tmp_path: Path):
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "g.lua").write_text("")
    root = str(tmp_path)
    assert L("local r = ...; return paths.filep(r .. '/f.txt'), paths.dirp(r .. '/f.txt'), paths.filep(r), "
             "paths.dirp(r), paths.filep(r .. '/none'), paths.dirp(r .. '/none')", root) == \
        (True, False, False, True, False, False)
    listing = L("local t = {}; for f in paths.files(...) do t[#t + 1] = f end; table.sort(t); return table.concat(t, ' ')", root)
    assert listing.split() == sorted([".", "..", "d", "f.txt"])
    assert L("local t = {}; for f in paths.files(..., '%.txt$') do t[#t + 1] = f end; return table.concat(t, ' ')", root) == "f.txt"
    assert L("local t = {}; for f in paths.iterdirs(...) do t[#t + 1] = f end; return table.concat(t, ' ')", root) == "d"
    assert L("local t = {}; for f in paths.iterfiles(...) do t[#t + 1] = f end; return table.concat(t, ' ')", root) == "f.txt"
    assert L("return paths.dir(...)", root + "/missing") is None


def test_mkdir_and_rmall(lua, tmp_path: Path):
    deep = tmp_path / "a" / "b" / "c"
    assert L("return paths.mkdir(...)", str(deep)) is True
    assert deep.is_dir()
    (deep / "file").write_text("x")
    ok, msg, _ = L("return paths.mkdir(...)", str(deep))
    assert ok is None and "exists" in msg
    assert L("return paths.rmall(...)", str(tmp_path / "a")) == (None, "missing second argument ('yes')")
    assert L("return paths.rmall(..., 'yes')", str(tmp_path / "a")) is True
    assert not (tmp_path / "a").exists()
    assert L("return paths.rmall(..., 'yes')", str(tmp_path / "none"))[1] == "not a file or directory"


def test_dofile_and_thisfile_relative_to_the_calling_file(lua, tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "main.lua").write_text("return paths.dofile('sub/helper.lua') + 1, paths.thisfile(), paths.thisfile('x.t7')")
    (tmp_path / "sub" / "helper.lua").write_text("return 41")
    value, here, rel = L("return dofile(...)", str(tmp_path / "main.lua"))
    assert value == 42 and here == str(tmp_path / "main.lua") and rel == str(tmp_path / "x.t7")


def test_tmpname_files_go_with_the_runtime(lua):
    names: list[str] = []

    def run() -> None:
        luabridge.require("paths")
        names.extend([luabridge.eval("paths.tmpname()"), luabridge.eval("paths.tmpname()")])
        assert all(os.path.isfile(n) for n in names)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    gc.collect()                                   # the thread's runtime closes
    assert len(set(names)) == 2 and all(os.path.isabs(n) for n in names)
    assert not any(os.path.exists(n) for n in names)


def test_misc(lua):
    assert L("return paths.home") == os.environ.get("HOME", ".")
    assert L("return paths.findprogram('sh')") in ("/bin/sh", "/usr/bin/sh")
    assert L("return paths.is_win()") is False


def test_paths_errors(lua):
    with pytest.raises(luabridge.LuaError, match="paths.concat: argument #2 must be a string, got number"):
        L("return paths.concat('a', 3)")
    with pytest.raises(luabridge.LuaError, match="paths.files: the filter must be a pattern string or a function"):
        L("return paths.files('.', 3)")


# ---- sys ----

def test_sys(lua):
    assert abs(L("return sys.clock()") - time.time()) < 5
    assert L("return sys.execute([[sh -c 'echo hi; echo err 1>&2']])") == "hi\nerr"
    assert L("return sys.fexecute('echo  spaced  ')") == "spaced"
    assert L("return sys.uname()") == ("linux" if pysys.platform.startswith("linux") else "macos")
    assert L("return sys.COLORS.red, sys.COLORS.Red, sys.COLORS._red, sys.COLORS.none") == \
        ("\x1b[0;31m", "\x1b[1;31m", "\x1b[41m", "\x1b[0m")
    assert L("return sys.dirname('/a/b'), sys.isNaN(0/0), sys.isNaN(1)") == ("/a", True, False)
    dt = L("sys.tic(); sys.sleep(0.02); return sys.toc()")
    assert 0.015 < dt < 1


# ---- xlua ----

@pytest.mark.parametrize("s, sep, parts", [
    ("a,b,,c", ",", ["a", "b", "", "c"]),
    (",a,", ",", ["a"]),
    ("a  b c", " +", ["a", "b", "c"]),
    ("abc", ",", ["abc"]),
    ("", ",", []),
])
def test_string_split(lua, s, sep, parts):
    got = L("local t = (...):split(select(2, ...)); return #t, table.concat(t, '|')", s, sep)
    assert got == (len(parts), "|".join(parts))


def test_progress_bar(lua, capfd):
    L("for i = 1, 20 do xlua.progress(i, 20) end")
    out = capfd.readouterr().out
    frames = out.split("\r")
    last = [f for f in frames if f.strip()][-1]
    assert "20/20" in last and "Tot:" in last and out.endswith("\n")
    bar = last[last.index("[") + 1:last.index("]")]
    assert set(bar) == {"="} | {">"} and bar.endswith(">")
    assert sum("ETA:" in f for f in frames) == 19


def test_xlua_require_and_helpers(lua, capfd):
    assert L("return xlua.require('no_such_package_xyz')") is False
    assert "could not be loaded" in capfd.readouterr().out
    assert L("return xlua.require('paths') == paths")
    assert L("return xlua.formatTime(3725.5), xlua.formatTime(0.25), xlua.formatTime(0)") == ("1h2m", "250ms", "0ms")
    assert L("local a, b = table.splice({1, 2, 3, 4}, 2, 2); return #a, a[2], #b, b[1]") == (2, 4, 2, 2)
    with pytest.raises(luabridge.LuaError, match="<Logger> bad"):
        L("xlua.error('bad', 'Logger')")


# ---- cutorch / cunn / cudnn without a GPU ----

def _device_present() -> bool:
    try:
        cuda.array_module()
    except RuntimeError:
        return False
    return True


def _in_fresh_runtime(code: str) -> Any:
    """Runs code in a new thread's runtime (the CUDA switch is read when cutorch loads) and
    returns its string result or the LuaError."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(luabridge.execute(code))
        except luabridge.LuaError as e:
            result.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    return result[0]


@pytest.fixture
def no_device(monkeypatch):
    monkeypatch.delenv(cuda.ENV_VAR, raising=False)
    monkeypatch.delenv("LUABRIDGE_CUDA_ON_CPU", raising=False)
    cuda.use_array_module(None)
    if _device_present():
        pytest.skip("a CUDA device is present: cutorch uses it")
    return monkeypatch


@pytest.mark.parametrize("package", ["cutorch", "cunn", "cudnn"])
def test_cuda_packages_need_a_device_or_the_switch(no_device, package):
    err = _in_fresh_runtime(f"require '{package}'")
    assert isinstance(err, luabridge.LuaError)
    assert "cutorch: no CUDA device" in err.message and "LUABRIDGE_CUDA_ON_CPU=1" in err.message
    # a failed require leaves no sentinel: the next ones fail the same way (not "loop or previous error")
    again = _in_fresh_runtime(f"""
      local ok1, e1 = pcall(require, '{package}')
      local ok2, e2 = pcall(require, '{package}')
      local ok3, e3 = pcall(require, 'cutorch')
      return tostring(ok1 or ok2 or ok3) .. '|' .. e1 .. '|' .. e2 .. '|' .. e3""")
    ok, e1, e2, e3 = again.split("|")
    assert ok == "false" and e1 == e2 == e3 and e1.endswith(err.message.split(": ", 1)[1])
    err = _in_fresh_runtime("require 'nn'; return nn.Linear(2, 2):cuda()")
    assert isinstance(err, luabridge.LuaError) and "no CUDA device" in err.message


_ON_CPU = """
require 'cudnn'
torch.manualSeed(1)
local net = nn.Sequential():add(cudnn.SpatialConvolution(1, 2, 3, 3)):add(cudnn.ReLU(true))
local ref = net:clone():float()
net:cuda()
local x = torch.randn(1, 5, 5)
local y = net:forward(x:cuda())
local f = torch.FloatTensor(2)
local crit = nn.MSECriterion():cuda()
return table.concat({
  torch.type(net.modules[1].weight), torch.type(y), torch.type(torch.CudaTensor(2)),
  torch.type(torch.CudaLongTensor(2)), torch.type(torch.Tensor(2):cuda()), torch.type(torch.Tensor(2):cudaDouble()),
  torch.type(torch.Tensor(2):type('torch.CudaTensor')), tostring(f:cuda() == f),
  tostring((y - ref:forward(x:float())):abs():max() == 0), tostring(cudnn.convert(net, cudnn) == net),
  tostring(cudnn.benchmark), tostring(cudnn.fastest), torch.type(cudnn.SpatialConvolution(1, 1, 1, 1)),
  tostring(cutorch.getDeviceCount()), tostring(cutorch.onCPU), torch.type(crit.gradInput),
  tostring(pcall(cutorch.setDevice, 2)),
}, ' ')
"""


def test_cuda_on_cpu_switch(no_device):
    no_device.setenv("LUABRIDGE_CUDA_ON_CPU", "1")
    out = _in_fresh_runtime(_ON_CPU)
    assert not isinstance(out, Exception), out
    assert out.split() == [
        "torch.FloatTensor", "torch.FloatTensor", "torch.FloatTensor", "torch.LongTensor",
        "torch.FloatTensor", "torch.DoubleTensor", "torch.FloatTensor", "true", "true", "true",
        "false", "false", "cudnn.SpatialConvolution", "1", "true", "torch.FloatTensor", "false",
    ]


def test_cutorch_with_the_numpy_device(monkeypatch):
    # with a device (here numpy standing in for CuPy) the CUDA types are the backend's own,
    # whatever the switch says
    monkeypatch.setenv("LUABRIDGE_CUDA_ON_CPU", "1")
    cuda.use_array_module(np)
    try:
        out = _in_fresh_runtime("require 'cunn'; local m = nn.Linear(2, 3):cuda(); "
                                "return torch.type(m.weight) .. ' ' .. tostring(cutorch.onCPU)")
    finally:
        cuda.use_array_module(None)
    assert out == "torch.CudaTensor false"


# ---- threads (every job runs in order on the calling thread) ----

@pytest.fixture(scope="module")
def threads_run():
    yield from fresh_runner("local threads = require 'threads'")


def round_robin(n_jobs: int, n_threads: int) -> list[int]:
    return [i % n_threads + 1 for i in range(n_jobs)]


def test_pool_runs_jobs_in_order_round_robin(threads_run):
    got = threads_run("""
      local pool = threads.Threads(4)
      local done = {}
      for i = 1, 6 do
        pool:addjob(function(x, y) return x * y, __threadid end,
                    function(p, tid) done[#done + 1] = {i, p, tid} end, i, i + 1)
      end
      pool:synchronize()
      pool:terminate()
      return {done, __threadid == nil}""")
    assert got[0] == [[i, i * (i + 1), t] for i, t in zip(range(1, 7), round_robin(6, 4))]
    assert got[1] is True    # __threadid is only set while a job runs


def test_init_functions_run_once_per_thread_and_return_the_last_ones_results(threads_run):
    got = threads_run("""
      local log = {}
      local pool, results = threads.Threads(3,
        function(id) log[#log + 1] = 'a' .. id .. '@' .. __threadid end,
        function(id) log[#log + 1] = 'b' .. id; return id * 10, 'x' .. id end)
      pool:terminate()
      return {log, results}""")
    assert got[0] == ["a1@1", "a2@2", "a3@3", "b1", "b2", "b3"]
    assert got[1] == [[10, "x1"], [20, "x2"], [30, "x3"]]


def bounded_fifo_trace(n_jobs: int, capacity: int) -> list[str]:
    """Events of adding n_jobs to a queue of `capacity` that runs its oldest job when full, then
    draining it: a<i> before each addjob, c<i> / e<i> for a job's callback / endcallback."""
    trace, queue = [], []
    for i in range(1, n_jobs + 1):
        trace.append(f"a{i}")
        if len(queue) == capacity:
            j = queue.pop(0)
            trace += [f"c{j}", f"e{j}"]
        queue.append(i)
    for j in queue:
        trace += [f"c{j}", f"e{j}"]
    return trace


def test_a_full_queue_runs_its_oldest_job_before_taking_one(threads_run):
    got = threads_run("""
      local pool = threads.Threads(2)
      local trace, accepts = {}, {}
      for i = 1, 5 do
        trace[#trace + 1] = 'a' .. i
        pool:addjob(function() trace[#trace + 1] = 'c' .. i end, function() trace[#trace + 1] = 'e' .. i end)
        accepts[#accepts + 1] = {pool:acceptsjob(), pool:hasjob()}
      end
      pool:synchronize()
      accepts[#accepts + 1] = {pool:acceptsjob(), pool:hasjob()}
      return {trace, accepts}""")
    assert got[0] == bounded_fifo_trace(5, 2)
    assert got[1] == [[True, True]] + [[False, True]] * 4 + [[True, False]]


def test_specific_mode_names_the_thread(threads_run):
    got = threads_run("""
      local pool = threads.Threads(3)
      local was = pool:specific()
      pool:specific(true)
      local ran = {}
      for _, id in ipairs({3, 1, 3, 2}) do
        pool:addjob(id, function(v) return __threadid, v end, function(t, v) ran[#ran + 1] = {t, v} end, id * 100)
      end
      local full = {pool:acceptsjob(3)}
      pool:synchronize()
      local ok, err = pcall(pool.addjob, pool, 4, function() end)
      local okAccept, errAccept = pcall(pool.acceptsjob, pool)
      pool:specific(false)
      return {was, pool:specific(), ran, ok, err, okAccept, errAccept}""")
    was, now, ran, ok, err, ok_accept, err_accept = got
    assert (was, now) == (False, False)
    assert ran == [[3, 300], [1, 100], [3, 300], [2, 200]]
    assert ok is False and "thread index (1..3) expected, got 4" in err
    assert ok_accept is False and "thread index (1..3) expected, got nil" in err_accept


def test_errors_name_the_thread_and_the_pool_goes_on(threads_run):
    got = threads_run("""
      local pool = threads.Threads(2)
      local function evil() error('bad input 7') end
      pool:addjob(function() evil() end)
      local ok1, err1 = pcall(pool.synchronize, pool)
      pool:addjob(function() return 5 end, function(v) error('end got ' .. v) end)
      local ok2, err2 = pcall(pool.synchronize, pool)
      local sum = 0
      pool:addjob(function() return 10 end, function(v) sum = sum + v end)
      pool:synchronize()
      local ok3, err3 = pcall(pool.dojob, pool)
      pool:terminate()
      local ok4, err4 = pcall(pool.addjob, pool, function() end)
      local ok5, err5 = pcall(threads.Threads, 0)
      return {ok1, err1, ok2, err2, sum, ok3, err3, ok4, err4, ok5, err5}""")
    ok1, err1, ok2, err2, total, ok3, err3, ok4, err4, ok5, err5 = got
    assert ok1 is False and err1.startswith("[thread 1 callback]") and "bad input 7" in err1
    assert "in function 'evil'" in err1                                   # a traceback, as torch7's
    assert ok2 is False and err2.startswith("[thread 2 endcallback]") and "end got 5" in err2
    assert total == 10
    assert ok3 is False and "no job queued" in err3
    assert ok4 is False and "thread system is not running" in err4
    assert ok5 is False and "number of threads must be a positive integer, got 0" in err5


def test_terminate_runs_the_queued_jobs_first(threads_run):
    got = threads_run("""
      local pool = threads.Threads(4)
      local n = 0
      for i = 1, 3 do pool:addjob(function() return i end, function(i) n = n + i end) end
      pool:terminate()
      return {n, pool:isrunning()}""")
    assert got == [6, False]


def test_data_loader_pattern(threads_run):
    """dcgan.torch's data.lua: init functions build a loader global per thread, jobs return
    batches that the endcallback copies into the caller's tensor."""
    got = threads_run("""
      local pool = threads.Threads(2,
        function() require 'torch' end,
        function(id) torch.manualSeed(id); loader = {next = 0, get = function(self)
          self.next = self.next + 1
          return torch.Tensor(2):fill(self.next)
        end} end)
      local batch, seen = torch.Tensor(2), {}
      for i = 1, 4 do
        pool:addjob(function() return loader:get() end, function(x) batch:copy(x); seen[#seen + 1] = batch:sum() end)
      end
      pool:synchronize()
      return seen""")
    # one Lua state: the loader global is shared, so batches count 1, 2, 3, 4 whatever the thread
    assert got == [2.0, 4.0, 6.0, 8.0]


def test_consumer_driven_loader_pattern(threads_run):
    """fb.resnet.torch's dataloader.lua: fill the queue while acceptsjob(), then dojob() one batch
    per step and refill, until hasjob() is false."""
    got = threads_run("""
      local pool = threads.Threads(3)
      local size, batchSize, nextIndex, sample = 10, 4, 1, nil
      local function enqueue()
        while nextIndex <= size and pool:acceptsjob() do
          local first, n = nextIndex, math.min(batchSize, size - nextIndex + 1)
          pool:addjob(function(a, k) local t = {} for i = a, a + k - 1 do t[#t + 1] = i * i end return t end,
                      function(batch) sample = batch end, first, n)
          nextIndex = nextIndex + batchSize
        end
      end
      local batches = {}
      while true do
        enqueue()
        if not pool:hasjob() then break end
        pool:dojob()
        if pool:haserror() then pool:synchronize() end
        batches[#batches + 1] = sample
      end
      return batches""")
    squares = [i * i for i in range(1, 11)]
    assert got == [squares[0:4], squares[4:8], squares[8:10]]


def test_serializations(threads_run):
    got = threads_run("""
      local t = torch.Tensor{1, 2, 3}
      local h = require('tds').Hash({a = 1})
      local obj = {t = t, f = function() return t:sum() end, h = h}
      local serialize, shared = require 'threads.serialize', require 'threads.sharedserialize'
      local copy = serialize.load(serialize.save(obj))
      local same = shared.load(shared.save(obj))
      local before = threads.serialization()
      threads.serialization('threads.sharedserialize')
      local after = threads.serialization()
      threads.serialization(before)
      return {copy.t == t, copy.t:totable(), copy.f(), copy.h.a, same.t == t, same.h == h, same.f(),
              before, after}""")
    assert got == [False, [1, 2, 3], 6, 1, True, True, 6, "threads.serialize", "threads.sharedserialize"]


def test_mutex_condition_and_safe(threads_run):
    got = threads_run("""
      local m = threads.Mutex()
      local same = threads.Mutex(m:id()) == m
      m:lock()
      local okRelock, errRelock = pcall(m.lock, m)
      m:unlock()
      local c = threads.Condition()
      c:signal(); c:broadcast()
      local okWait, errWait = pcall(c.wait, c, m)
      local count = 0
      local inc = threads.safe(function(k) count = count + k; return count end, m)
      local r = inc(5)
      local boom = threads.safe(function() error('inside') end, m)
      local okBoom = pcall(boom)
      m:lock(); m:unlock()                 -- boom's error left m unlocked
      return {same, okRelock, errRelock, okWait, errWait, r, okBoom}""")
    same, ok_relock, err_relock, ok_wait, err_wait, r, ok_boom = got
    assert same is True and r == 5 and ok_boom is False
    assert ok_relock is False and "already locked" in err_relock
    assert ok_wait is False and "would never return" in err_wait
