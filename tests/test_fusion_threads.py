"""Large fused CPU groups on several threads (lua/luabridge/graph/fusion_threads.lua, driven by
fusion_ir.lua's blocked kernels): bench/fusion.py's three chains and random graphs of every
fusable op, float32 and float64, below and above the size from which a group is split, on 1 and 2
threads and with the threads switched off. The split kernel runs the same numpy loops per block
as the one-thread kernel, so its values are the same bit for bit; against the unfused run and
numpy float64 references they agree within rounding."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import luabridge
import luabridge.tinyflow as tf
from helpers import load_bench
from luabridge.core.interop import from_numpy
from luabridge.core.runtime import bridge
from luabridge.graph import Session, fusion_ir, fusion_threads

# n above which the chains' groups are split (8 cheap passes: 8n units; float64 counts twice;
# fusion_ir.lua's THREAD_LEAST = 4e5 a thread, so 2 threads from n = 1e5 in float32)
BELOW, ABOVE = 4099, 200003
TOL = {np.float32: 2e-6, np.float64: 1e-13}

CHAIN_REFS = {   # bench/fusion.py's chains written out in float64
    "cheap": lambda x, y: (np.sqrt(np.maximum(x * 1.5 + y - 0.25, 0)) * y + 1) / y,
    "transcendental": lambda x, y: np.exp(-np.log(np.tanh(np.exp(x * 0.5)) + y)) + 1,
    "mixed": lambda x, y: np.exp(3 * np.tanh(np.log(np.exp(x * y) + 1) - y)),
}

SETTINGS = """
local threads, watch = ...
local torch = require 'torch'
local blas = require('torch.backend.cpu.blas')
local old = { blas.watchLoad, torch.getnumthreads() }
if watch ~= nil then blas.watchLoad = watch end
if threads then torch.setnumthreads(threads) end
return old[1], old[2]
"""


@pytest.fixture
def threads():
    """set(n): torch.setnumthreads(n) with BLAS's free-CPU check off (the counts asked for are the
    counts used on a busy machine); both put back after the test, and the fusion threads on."""
    b = bridge()
    fn = b.load(SETTINGS, "=test_fusion_threads")
    watch, count = b.call(fn, None, None)
    yield lambda n: b.call(fn, n, False)
    b.call(fn, count, watch)
    fusion_threads.threaded(True)


def _chain_session(name, dtype, config):
    bench = load_bench("fusion.py", "bench_fusion")
    code = tf.float32 if dtype == np.float32 else tf.float64
    x, y = tf.placeholder(code, name="x"), tf.placeholder(code, name="y")
    return x, y, bench.CHAINS[name](x, y, bench.GraphOps), Session(config)


def _inputs(rng, n, dtype):
    return [(rng.random(n) + 0.5).astype(dtype) for _ in range(2)]


@pytest.mark.parametrize("n", [BELOW, ABOVE])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CHAIN_REFS))
def test_chains_on_one_and_two_threads_equal_one_thread_unfused_and_numpy(rng, threads, name, dtype, n):
    xv, yv = _inputs(rng, n, dtype)
    x, y, z, fused = _chain_session(name, dtype, "cpu fusion")
    feed = {x: xv, y: yv}
    got = {}
    for count, on in ((1, True), (2, True), (2, False)):
        threads(count)
        fusion_threads.threaded(on)
        before = fusion_threads.jobs()[0]
        got[count, on] = fused.run(z, feed)
        split = fusion_threads.jobs()[0] - before
        assert split == (1 if count == 2 and on and n == ABOVE else 0), (count, on, split)
    np.testing.assert_array_equal(got[2, True], got[1, True])
    np.testing.assert_array_equal(got[2, False], got[1, True])
    plain = Session("cpu").run(z, feed)
    want = CHAIN_REFS[name](xv.astype(np.float64), yv.astype(np.float64))
    tol = TOL[dtype]
    np.testing.assert_allclose(got[2, True], plain, rtol=tol, atol=tol)
    np.testing.assert_allclose(got[2, True], want, rtol=10 * tol, atol=10 * tol)


# ---- random graphs of the fusable ops ----

# each: (graph op on a symbol, the same in float64 numpy); every one keeps values finite for any
# finite input (the log, sqrt and div operands are made positive first)
UNARY = [
    (lambda a: tf.tanh(a), np.tanh),
    (lambda a: tf.exp(tf.tanh(a)), lambda a: np.exp(np.tanh(a))),
    (lambda a: tf.log(tf.nn.relu(a) + 1.0), lambda a: np.log(np.maximum(a, 0) + 1)),
    (lambda a: tf.sqrt(tf.nn.relu(a)), lambda a: np.sqrt(np.maximum(a, 0))),
    (lambda a: a * 0.75, lambda a: a * 0.75),
    (lambda a: a - 0.5, lambda a: a - 0.5),
    (lambda a: 0.25 - a, lambda a: 0.25 - a),
    (lambda a: 2.0 / (tf.nn.relu(a) + 1.0), lambda a: 2 / (np.maximum(a, 0) + 1)),
    (lambda a: tf.tanh(a) ** 2.0, lambda a: np.tanh(a) ** 2),
    (lambda a: a / 3.0, lambda a: a / 3),
]
BINARY = [
    (lambda a, b: a + b, np.add),
    (lambda a, b: a - b, np.subtract),
    (lambda a, b: a * b, np.multiply),
    (lambda a, b: a / (tf.exp(b) + 1.0), lambda a, b: a / (np.exp(b) + 1)),
]


def _random_graph(rng, leaves, depth):
    """A random expression over the leaves ((symbol, float64 array) pairs) as (symbol, values)."""
    if depth == 0 or rng.random() < 0.15:
        return leaves[rng.integers(len(leaves))]
    if rng.random() < 0.45:
        (sym_a, a), (sym_b, b) = _random_graph(rng, leaves, depth - 1), _random_graph(rng, leaves, depth - 1)
        op, ref = BINARY[rng.integers(len(BINARY))]
        return op(sym_a, sym_b), ref(a, b)
    sym, a = _random_graph(rng, leaves, depth - 1)
    op, ref = UNARY[rng.integers(len(UNARY))]
    return op(sym), ref(a)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_graphs_split_over_threads_give_the_one_thread_values(threads, seed, dtype):
    rng = np.random.default_rng(seed)
    code = tf.float32 if dtype == np.float32 else tf.float64
    names = ["a", "b", "c"]
    syms = [tf.placeholder(code, name=k) for k in names]
    n = ABOVE if seed % 2 else BELOW
    vals = [(rng.standard_normal(n) * 2).astype(dtype) for _ in names]
    z, want = _random_graph(rng, list(zip(syms, [v.astype(np.float64) for v in vals])), 6)
    z = z + syms[0] * 0.5   # never a bare leaf: at least one fused node
    want = want + vals[0].astype(np.float64) * 0.5
    feed = dict(zip(syms, vals))
    fused = Session("cpu fusion")
    threads(1)
    one = fused.run(z, feed)
    threads(2)
    two = fused.run(z, feed)
    fusion_threads.threaded(False)
    off = fused.run(z, feed)
    assert fused.executor_for(z).plan.graph.attrs["fusion"], "nothing fused"
    np.testing.assert_array_equal(two, one)
    np.testing.assert_array_equal(off, one)
    tol = 5 * TOL[dtype]
    np.testing.assert_allclose(two, Session("cpu").run(z, feed), rtol=tol, atol=tol)
    np.testing.assert_allclose(two, want, rtol=20 * tol, atol=20 * tol)


# ---- the kernels and the team directly ----

def _kernel(exprs, inputs, out):
    b = bridge()
    closure = b.call(b.module("luabridge.graph.fusion_ir").closure,
                     b.lua.table_from([fusion_ir.as_lists(e) for e in exprs], recursive=True),
                     b.lua.table_from([from_numpy(a) for a in inputs]), b.lua.table_from([from_numpy(out)]), True)
    return closure


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_fn_split_over_threads_gives_the_one_thread_values(rng, threads, dtype):
    """Each fn of the IR (numpy loops and the Lua loops of comparisons, where and clamp) in one
    group with a broadcast input and a tail block, with its output a leaf of the sum."""
    n = 300007
    x, y = rng.standard_normal(n).astype(dtype), (rng.random(n) + 0.5).astype(dtype)
    s = np.array([0.25], dtype)
    a, b, c = ("in", 0), ("in", 1), ("in", 2)
    terms = [(fn, *[a, b, c][:fusion_ir.FNS[fn][0]]) for fn in sorted(fusion_ir.FNS)
             if fn not in ("log", "sqrt", "rsqrt", "pow")]
    terms += [("log", b), ("sqrt", b), ("rsqrt", b), ("pow", b, a), ("clamp", a, ("neg", c), c)]
    expr = terms[0]
    for t in terms[1:]:
        expr = ("add", expr, t)
    outs = []
    for count in (1, 2):
        threads(count)
        out = np.empty(n, dtype)
        before = fusion_threads.jobs()[0]
        _kernel([expr], [x, y, s], out)()
        assert fusion_threads.jobs()[0] - before == count - 1
        outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])
    want = fusion_ir.evaluate(expr, [x.astype(np.float64), y.astype(np.float64), np.float64(s)])
    tol = 20 * TOL[dtype]
    np.testing.assert_allclose(outs[1], want, rtol=tol, atol=tol)


def test_the_workers_take_part_and_start_again_after_a_stop(rng, threads):
    threads(2)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    out = np.empty(n, np.float32)
    run = _kernel([("tanh", ("exp", ("mul", ("in", 0), ("const", 0.5))))], [x], out)
    want = np.tanh(np.exp(x * np.float32(0.5)))
    b = bridge()
    stop = b.module("luabridge.graph.fusion_threads").stop
    for _ in range(2):
        helped = fusion_threads.jobs()[1]
        for _ in range(400):   # a worker on a busy machine may wake late: its chunks are then the caller's
            run()
            if fusion_threads.jobs()[1] > helped:
                break
        assert fusion_threads.jobs()[1] > helped, "no worker ran a chunk"
        np.testing.assert_allclose(out, want, rtol=2e-6)
        b.call(stop)


ERRORS = """
local ffi = require 'ffi'
local team = require 'luabridge.graph.fusion_threads'
pcall(ffi.cdef, 'int luabridge_test_usleep(unsigned us) __asm__("usleep");')
local n, results = 8192, {}
-- the calling thread's own error object comes back as it was raised, after the job
local d, keep = team.describe('return function() return function() end end', n, 'float', {}, {})
local failure = { code = 7 }
local ok, err = pcall(team.run, d, function(lo) if lo > 0 then error(failure) end end, n, 2, 1024, keep)
results[1] = not ok and err == failure
-- a worker's error is raised with its message: the caller's first chunk waits for a worker to
-- run one (up to 20 s: the worker's runtime starts on first use, and may wake late)
local src = 'return function() return function(lo, hi) error("worker chunk at " .. lo, 0) end end'
d, keep = team.describe(src, n, 'float', {}, {})
local before = select(2, team.runs())
local function kernel(lo)
  for _ = 1, 20000 do
    if select(2, team.runs()) > before then return end
    ffi.C.luabridge_test_usleep(1000)
  end
end
ok, err = pcall(team.run, d, kernel, n, 2, 1024, keep)
results[2] = not ok and tostring(err)
return results[1], results[2]
"""


def test_errors_in_chunks_are_raised_after_the_job(threads):
    threads(2)
    b = bridge()
    same_object, message = b.call(b.load(ERRORS, "=test_fusion_threads"))
    assert same_object is True
    assert message and message.startswith("fused group (worker thread): worker chunk at "), message


def test_the_switch_is_read_at_every_run(rng, threads):
    threads(2)
    x, y, z, fused = _chain_session("cheap", np.float32, "cpu fusion")
    xv, yv = _inputs(rng, ABOVE, np.float32)
    assert fusion_threads.threaded() is True
    assert fusion_threads.threaded(False) is False
    before = fusion_threads.jobs()[0]
    fused.run(z, {x: xv, y: yv})
    assert fusion_threads.jobs()[0] == before
    fusion_threads.threaded(True)
    fused.run(z, {x: xv, y: yv})
    assert fusion_threads.jobs()[0] == before + 1


def test_the_environment_switch_turns_the_threads_off():
    code = "from luabridge.graph import fusion_threads; print(fusion_threads.threaded())"
    for value, want in (("0", "False"), ("1", "True")):
        env = dict(os.environ, LUABRIDGE_FUSION_THREADS=value)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert done.stdout.strip().splitlines()[-1:] == [want], done.stdout + done.stderr


def test_a_failed_size_check_names_the_group(rng):
    with pytest.raises(luabridge.LuaError, match="fused group: input 1 has 3 elements, the output 4"):
        _kernel([("neg", ("in", 0))], [np.zeros(3)], np.zeros(4))


NO_THREADS = """
local team = require 'luabridge.graph.fusion_threads'
local saved = package.loaded['threads.Thread']
team.stop()
package.loaded['threads.Thread'] = function() error('no threads here') end
local ok, err = pcall(...)
package.loaded['threads.Thread'] = saved
local why = team.startError
team.stop()
if not ok then error(err, 0) end
return why
"""


def test_a_runtime_that_cannot_start_threads_runs_the_chunks_itself(rng, threads):
    threads(2)
    n = 300001
    x = rng.standard_normal(n)
    out = np.zeros(n)
    run = _kernel([("add", ("mul", ("in", 0), ("const", 3.0)), ("const", 1.0))], [x], out)
    b = bridge()
    why = b.call(b.load(NO_THREADS, "=test_fusion_threads"), run)
    assert "no threads here" in why
    np.testing.assert_array_equal(out, x * 3.0 + 1.0)
    assert fusion_threads.jobs() == (0, 0)   # stopped: a fresh team next time
    run()
    assert fusion_threads.jobs()[0] == 1
