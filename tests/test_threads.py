"""torch.setnumthreads and the BLAS thread rule (lua/torch/backend/cpu/blas.lua): the count
OpenBLAS reports follows the setting, each call gets 1 .. setting threads, and products are
right at every count (numpy float64 references). No timing: bench/gemm_threads.py measures.
At the end: torch/threads' own scripts run unmodified (the threads package itself:
test_threads_parallel.py)."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import luabridge
from helpers import N, T, call, draw, lua_fn
from luabridge.providers.torch_cpu import linalg

blas = lua_fn("function() return require 'torch.backend.cpu.blas' end")
set_threads = lua_fn("function(n) torch.setnumthreads(n) end")
get_threads = lua_fn("function() return torch.getnumthreads() end")
library_threads = lua_fn("function() return require('torch.backend.cpu.blas').libraryThreads() end")
threads_for = lua_fn("function(work, least) return require('torch.backend.cpu.blas').threadsFor(work, least) end")
# r = a . b with every BLAS call on exactly `n` threads (the rule replaced for the call)
fixed_mm = lua_fn("""function(n, a, b)
  local blas = require 'torch.backend.cpu.blas'
  local rule = blas.threadsFor
  blas.threadsFor = function() return n end
  local ok, r = pcall(torch.mm, a, b)
  blas.threadsFor = rule
  assert(ok, r)
  return r
end""")


@pytest.fixture
def restore_threads(lua):
    before = get_threads()
    yield
    set_threads(before)


def needs_openblas():
    if blas().libraryThreads is None:
        pytest.skip("the BLAS library found is not OpenBLAS: no thread count to read")


def test_default_is_the_cores(lua, monkeypatch):
    assert get_threads() == linalg.threads()[0]   # what the runtime started with
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert linalg.threads()[0] == len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert linalg.threads()[0] == 3
    assert linalg.threads()[1] == os.cpu_count()


def test_setnumthreads_reaches_openblas(restore_threads):
    needs_openblas()
    for n in (1, 3, 2, 1):
        set_threads(n)
        assert get_threads() == n
        assert library_threads() == n
        # a product at another count puts the setting back after it
        fixed_mm(2 if n == 1 else 1, T(np.ones((70, 70))), T(np.ones((70, 70))))
        assert library_threads() == n


def test_rule_stays_within_the_setting(restore_threads):
    least = 1000
    set_threads(1)
    assert threads_for(10**12, least) == 1
    for n in (2, 4):
        set_threads(n)
        assert threads_for(1, least) == 1
        assert threads_for(2 * least - 1, least) == 1   # below two threads' worth: one thread
        for work in (2 * least, 3 * least, 10**12):
            assert 1 <= threads_for(work, least) <= min(n, work // least)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_right_at_every_thread_count(rng, restore_threads, dtype):
    a, b = draw(rng, (300, 200), dtype), draw(rng, (200, 310), dtype)
    mat, vec = draw(rng, (1100, 1000), dtype), draw(rng, 1000, dtype)   # big enough to split
    ref, mv_ref = a.astype(np.float64) @ b, mat.astype(np.float64) @ vec
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    for n in (1, 2, 3):
        set_threads(n)
        np.testing.assert_allclose(N(fixed_mm(n, T(a), T(b))), ref, rtol=rtol, atol=rtol * 100)
        np.testing.assert_allclose(N(call("mm", T(a), T(b))), ref, rtol=rtol, atol=rtol * 100)
        np.testing.assert_allclose(N(call("mv", T(mat), T(vec))), mv_ref, rtol=rtol, atol=rtol * 1000)


def test_setnumthreads_refuses_bad_counts(lua):
    for bad in ("0", "-1", "1.5", "'two'"):
        with pytest.raises(luabridge.LuaError, match="setnumthreads: expected a positive integer"):
            luabridge.execute(f"torch.setnumthreads({bad})")


def test_idle_workers_sleep_soon(lua):
    """OpenBLAS's idle-worker spin is shortened (linalg.quiet_workers) unless the user chose one."""
    needs_openblas()
    assert os.environ.get("OPENBLAS_THREAD_TIMEOUT") is not None
    assert blas().spinSeconds == pytest.approx(linalg.spin_seconds())


def test_load_watch_can_be_turned_off(restore_threads):
    """Without the free-CPU count, a product big enough gets every thread of the setting."""
    set_threads(2)
    watch = lua_fn("function(on) require('torch.backend.cpu.blas').watchLoad = on end")
    watch(False)
    try:
        assert threads_for(10**12, 1000) == 2
    finally:
        watch(True)


def test_each_call_asks_the_rule_with_its_size(lua):
    """mm, mv and ger ask blas.threadsFor with their multiply-adds (elements for mv and ger)."""
    asked = lua_fn("""function(a, b, x, y)
      local blas = require 'torch.backend.cpu.blas'
      local rule, seen = blas.threadsFor, {}
      blas.threadsFor = function(work, least) seen[#seen + 1] = { work, least }; return 1 end
      local ok, err = pcall(function() torch.mm(a, b); torch.mv(a, x); torch.ger(x, y) end)
      blas.threadsFor = rule
      assert(ok, err)
      return seen, blas.minWork.gemmDouble, blas.minWork.gemv
    end""")
    # float64 arrays: a DoubleTensor product asks with the Double gemm's least per thread
    seen, gemm, gemv = asked(np.ones((5, 7)), np.ones((7, 3)), np.ones(7), np.ones(4))
    assert [tuple(seen[i].values()) for i in (1, 2, 3)] == [(5 * 3 * 7, gemm), (5 * 7, gemv), (7 * 4, gemv)]


def test_gemm_least_per_thread_by_type_and_shape(lua):
    """blas.gemmLeast: Double products split from minWork.gemmDouble per thread, Float ones from
    minWork.gemm, except Linear's gradWeight form (row-major a^T . b, BLAS's ta false and tb true)
    with k <= minWork.shortK, from minWork.gemmShortK (bench/gemm_threads.py measured where a second
    thread pays: Double from about 1M multiply-adds, Float from 8M, that Float form from 1M)."""
    least = lua_fn("""function(m, n, k, ta, tb, dtype)
      local blas = require 'torch.backend.cpu.blas'
      local rule, seen = blas.threadsFor, {}
      blas.threadsFor = function(work, least) seen[#seen + 1] = least; return 1 end
      local T = torch[dtype]
      local a = ta and T(k, m):fill(1):t() or T(m, k):fill(1)
      local b = tb and T(n, k):fill(1):t() or T(k, n):fill(1)
      local ok, err = pcall(torch.mm, a, b)
      blas.threadsFor = rule
      assert(ok, err)
      return seen[#seen], blas.minWork
    end""")
    _, work = least(2, 2, 2, False, False, "FloatTensor")
    assert work["gemmDouble"] < work["gemm"] and work["gemmShortK"] < work["gemm"] and work["shortK"] == 64
    for dtype in ("FloatTensor", "DoubleTensor"):
        for ta in (False, True):
            for tb in (False, True):
                for k in (50, 64, 65, 128):
                    got, _ = least(512, 128, k, ta, tb, dtype)
                    if dtype == "DoubleTensor":
                        want = work["gemmDouble"]
                    elif ta and not tb and k <= 64:   # row-major a^T . b: gradWeight = gradOutput^T . input
                        want = work["gemmShortK"]
                    else:
                        want = work["gemm"]
                    assert got == want, (dtype, ta, tb, k)
    # the LSTM's gradWeight (512x128 over a batch of 50, 3.3M multiply-adds) gets 2 threads when 2 are allowed and free
    rule = lua_fn("""function(work, least)
      local blas = require 'torch.backend.cpu.blas'
      local saved, watch = blas.threads, blas.watchLoad
      blas.threads, blas.watchLoad = 2, false
      local n = blas.threadsFor(work, least)
      blas.threads, blas.watchLoad = saved, watch
      return n
    end""")
    assert rule(512 * 128 * 50, work["gemmShortK"]) == 2
    assert rule(50 * 512 * 128, work["gemm"]) == 1
    assert rule(50 * 512 * 128, work["gemmDouble"]) == 2


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads thread signal masks from Linux's /proc")
def test_blas_workers_leave_ctrl_c_to_the_main_thread():
    """The restarted OpenBLAS pool's workers and oneDNN's OpenMP team block SIGINT: a Ctrl-C that
    reached a worker would be lost to a main thread waiting in readline (luabridge th)."""
    import subprocess
    import sys
    script = (
        "import os, luabridge\n"
        "luabridge.execute(\"require 'nn'; torch.setnumthreads(2); require('torch.backend.cpu.blas').watchLoad = false; "
        "torch.mm(torch.rand(300, 300), torch.rand(300, 300)); "
        "nn.SpatialConvolution(32, 32, 3, 3):float():forward(torch.FloatTensor(4, 32, 32, 32):uniform())\")\n"
        "main = os.getpid()\n"
        "for tid in sorted(os.listdir('/proc/self/task')):\n"
        "    for line in open(f'/proc/self/task/{tid}/status'):\n"
        "        if line.startswith('SigBlk:'):\n"
        "            print(int(tid) == main, int(line.split()[1], 16) >> 1 & 1)\n")
    # a fresh process, as a user starts one (this one's runtime has set OpenBLAS's timeout)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env=env, timeout=300).stdout
    rows = [line.split() for line in out.splitlines()]
    workers = [blocked for is_main, blocked in rows if is_main == "False"]
    assert ["True", "0"] in rows                      # the main thread takes SIGINT
    if linalg.find_blas() is not None and workers:
        assert set(workers) == {"1"}, out


# ---- torch/threads' own test and benchmark scripts, run unmodified ----------------------------
# LUABRIDGE_THREADS_TESTS names a checkout of github.com/torch/threads (not part of the project);
# without it these cases skip. Each: folder, script, arguments, a line its output must hold.
# test-threads-coroutine.lua returns early on _VERSION 'Lua 5.1', as under torch7's LuaJIT;
# test-threads-multiple.lua (1000 pools) and test-threads-shared.lua (a tds.Hash of a million
# strings copied into every job) take minutes on 2 cores.
UPSTREAM_THREADS = [
    ("test", "test-threads.lua", [], r"^10 jobs done$"),
    ("test", "test-threads-async.lua", [], r"^PASSED$"),
    ("test", "test-threads-coroutine.lua", [], r"^Unsupported test for PUC Lua 5\.1$"),
    ("test", "test-threads-error.lua", [], None),
    ("test", "test-threads-multiple.lua", [], r"PASSED$"),
    ("test", "test-threads-safe.lua", ["100"], r"^PASSED$"),
    ("test", "test-threads-shared.lua", [], r"^PASSED$"),
    ("test", "test-atomic.lua", [], r"^PASSED$"),
    ("test", "test-low-level.lua", [], r"^\| done$"),
    ("test", "test-traceback.lua", [], r"^I'm doing fine$"),
    ("benchmark", "benchmark.lua", ["-nexmlp", "600", "-nexcnn", "60"], r"^cnn_256x256\t[\d.]+$"),
    ("benchmark", "benchmark-threaded.lua", ["-nexmlp", "600", "-nexcnn", "60", "-batch", "10", "-threads", "2"],
     r"^cnn_256x256\t[\d.]+$"),
]


@pytest.mark.parametrize("folder, script, args, expect", UPSTREAM_THREADS, ids=[s for _, s, _, _ in UPSTREAM_THREADS])
def test_upstream_threads_scripts(tmp_path, folder, script, args, expect):
    checkout = os.environ.get("LUABRIDGE_THREADS_TESTS", "")
    if not os.path.isdir(os.path.join(checkout, "test")):
        pytest.skip("torch/threads' scripts need LUABRIDGE_THREADS_TESTS (a checkout of github.com/torch/threads)")
    work = tmp_path / folder
    shutil.copytree(os.path.join(checkout, folder), work)
    done = subprocess.run([sys.executable, "-m", "luabridge", "th", script, *args], cwd=work,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    if expect is not None:
        assert re.search(expect, done.stdout, re.MULTILINE), done.stdout[-2000:]
