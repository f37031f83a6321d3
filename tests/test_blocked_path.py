"""The threaded, blocked elementwise path (luabridge/providers/torch_cpu/blocked.py, driven by
lua/torch/backend/cpu/pointwise.lua): single ops, torch.elementwise programs, optim's fused
updates and Dropout's threaded masks, each against numpy float64 and against the old passes
(`blocked.enabled = false`), on 1 and 2 threads, above and below the size where it starts."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import luabridge
from helpers import N, T, lua_fn

BIG = 600_000     # above blocked.from and 2 x blocked.least for Float and Double
SMALL = 1000

_SETUP = lua_fn("""function(enabled, threads)
  local pw = require('torch.backend.cpu.pointwise').blocked
  local blas = require 'torch.backend.cpu.blas'
  pw.enabled = enabled
  blas.watchLoad = threads == 0    -- 0: put back
  if threads > 0 then torch.setnumthreads(threads) end
  return pw.runs
end""")
_DEFAULT_THREADS = luabridge.eval("(function() require 'torch'; return torch.getnumthreads() end)()")


@pytest.fixture
def paths():
    """setup(enabled, threads) -> the runs so far; puts everything back afterwards."""
    yield _SETUP
    _SETUP(True, 0)
    luabridge.eval(f"torch.setnumthreads({_DEFAULT_THREADS})")


# op, Lua body over r, a, b, c (tensors) and v, numpy float64 formula
OPS = {
    "add": ("r:add(a, v)", lambda a, b, c, v: a + v),
    "cadd": ("r:add(a, b)", lambda a, b, c, v: a + b),
    "axpy": ("r:add(a, v, b)", lambda a, b, c, v: a + v * b),
    "mul": ("r:mul(a, v)", lambda a, b, c, v: a * v),
    "cmul": ("r:cmul(a, b)", lambda a, b, c, v: a * b),
    "div": ("r:div(a, v)", lambda a, b, c, v: a / v),
    "cdiv": ("r:cdiv(a, b)", lambda a, b, c, v: a / b),
    "addcmul": ("r:addcmul(a, v, b, c)", lambda a, b, c, v: a + v * b * c),
    "addcdiv": ("r:addcdiv(a, v, b, c)", lambda a, b, c, v: a + v * b / c),
    "sqrt": ("r:sqrt(a)", lambda a, b, c, v: np.sqrt(a)),
}
# the in-place forms: a is r
INPLACE = {
    "add": "a:add(v)", "cadd": "a:add(b)", "axpy": "a:add(v, b)", "mul": "a:mul(v)", "cmul": "a:cmul(b)",
    "div": "a:div(v)", "cdiv": "a:cdiv(b)", "addcmul": "a:addcmul(v, b, c)", "addcdiv": "a:addcdiv(v, b, c)",
    "sqrt": "a:sqrt()",
}

_OP = lua_fn("""function(body, a, b, c, v, inplace)
  local r = a.new()
  a, b, c = a:clone(), b:clone(), c:clone()
  loadstring('local r, a, b, c, v = ...; ' .. body)(r, a, b, c, v)
  return inplace and a or r
end""")


def _inputs(dtype, n):
    rng = np.random.default_rng(n)
    return [rng.uniform(0.5, 2.0, n).astype(dtype) for _ in range(3)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [BIG, SMALL])
@pytest.mark.parametrize("op", list(OPS))
def test_ops_match_numpy_and_the_old_passes(paths, op, n, dtype, threads):
    a, b, c = _inputs(dtype, n)
    v = 0.75
    want = OPS[op][1](*(x.astype(np.float64) for x in (a, b, c)), v)
    for inplace in (False, True):
        body = INPLACE[op] if inplace else OPS[op][0]
        before = paths(True, threads)
        new = N(_OP(body, T(a), T(b), T(c), v, inplace))
        runs = paths(False, threads) - before
        old = N(_OP(body, T(a), T(b), T(c), v, inplace))
        tol = 1e-6 if dtype == np.float32 else 1e-14
        np.testing.assert_allclose(new, want, rtol=tol)
        np.testing.assert_allclose(new, old, rtol=tol)
        # addcmul / addcdiv take the path on 2 threads and Float's on 1 too, the other single ops
        # never (numpy's one pass or BLAS's axpy is as fast), small ones never
        addc = op in ("addcmul", "addcdiv")
        expect = n == BIG and addc and (threads == 2 or dtype == np.float32)
        assert runs == (1 if expect else 0), (op, n, threads, runs)


_STRIDED = lua_fn("""function(a, b)
  local A, B = a:view(350, 400):t(), b:view(350, 400):t()     -- not contiguous
  local r = A.new():resizeAs(A)
  r:cmul(A, B)
  local s = a:clone()
  local lo, hi = s:narrow(1, 1, s:size(1) - 1), s:narrow(1, 2, s:size(1) - 1)   -- overlap by all but one
  hi:add(lo, 0.5, lo:clone())                                    -- partly overlapping operands
  return r, s
end""")


def test_strided_and_partly_overlapping_operands_fall_back(paths):
    a, b, _ = _inputs(np.float32, 140_000)
    before = paths(True, 2)
    r, s = _STRIDED(T(a), T(b))
    assert paths(True, 2) == before
    np.testing.assert_allclose(N(r), (a * b).reshape(350, 400).T, rtol=1e-6)
    # torch7 reads element by element: s[i] = s[i-1] + 0.5 * a[i-1], a running sum
    paths(False, 2)
    assert np.array_equal(N(s), N(_STRIDED(T(a), T(b))[1]))
    want = a[0] + 0.5 * np.concatenate([[0], np.cumsum(a[:-1].astype(np.float64))])
    np.testing.assert_allclose(N(s), want, rtol=1e-3)


_PROGRAM = lua_fn("""function(a, b, enabled)
  require('torch.backend.cpu.pointwise').blocked.enabled = enabled
  local x, y = a:clone(), b:clone()
  local ran = torch.elementwise('x = maximum(x*k, abs(y) - 1); y = exp(-x) + log(y) / x', { x = x, y = y }, { k = 3 })
  require('torch.backend.cpu.pointwise').blocked.enabled = true
  return ran, x, y
end""")


def test_elementwise_programs_run_statements_in_order(paths):
    paths(True, 2)
    a, b, _ = _inputs(np.float64, BIG)
    ran, x, y = _PROGRAM(T(a), T(b), True)
    assert ran is True
    wx = np.maximum(a * 3, np.abs(b) - 1)
    np.testing.assert_allclose(N(x), wx, rtol=1e-14)
    np.testing.assert_allclose(N(y), np.exp(-wx) + np.log(b) / wx, rtol=1e-14)
    ran, x2, _ = _PROGRAM(T(a), T(b), False)
    assert ran is False and np.array_equal(N(x2), a)   # declined: nothing written


@pytest.mark.parametrize("program, message", [
    ("x = ", "elementwise program"),
    ("x = q * 2", "unknown name 'q'"),
    ("z = x", "each statement assigns one tensor"),
    ("x = x ** 2", "unsupported"),
])
def test_bad_programs_are_clear_errors(program, message):
    f = lua_fn("function(p, a) return torch.elementwise(p, { x = a }, {}) end")
    with pytest.raises(luabridge.LuaError, match=message):
        f(program, T(np.ones(70_000, np.float32)))


def test_elementwise_checks_its_arguments():
    f = lua_fn("function() return torch.elementwise('x = x', { x = 3 }) end")
    with pytest.raises(luabridge.LuaError, match="torch.elementwise: x is not a tensor named by a string"):
        f()


def test_the_environment_switch_turns_the_path_off():
    code = ("import luabridge; luabridge.require('nn'); print(luabridge.eval(\"(function() local x = torch.rand(100000); "
            "return tostring(torch.elementwise('x = x * 2', {x = x})) .. ' ' .. "
            "tostring(require('torch.backend.cpu.pointwise').blocked.enabled) end)()\"))")
    env = dict(os.environ, LUABRIDGE_BLOCKED="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["false", "false"], out.stderr


# ------------------------------------------------------------------------------------------
# optim's updates on flattened parameters

_OPTIM = lua_fn("""function(name, config, x0, target, steps, enabled, threads)
  require 'optim'
  require('torch.backend.cpu.pointwise').blocked.enabled = enabled
  local blas = require 'torch.backend.cpu.blas'
  blas.watchLoad = false
  torch.setnumthreads(threads)
  config = loadstring('return ' .. config)()
  local x, grad, scale = x0:clone(), x0.new(), torch.linspace(0.5, 2, x0:size(1)):typeAs(x0)
  local function feval(p)            -- f = sum(scale * (p - target)^2) / 2
    grad:resizeAs(p):copy(p):add(-1, target):cmul(scale)
    return 0, grad
  end
  local runs = require('torch.backend.cpu.pointwise').blocked.runs
  for _ = 1, steps do optim[name](feval, x, config) end
  runs = require('torch.backend.cpu.pointwise').blocked.runs - runs
  require('torch.backend.cpu.pointwise').blocked.enabled = true
  blas.watchLoad = true
  return x, runs
end""")


def _reference(name, cfg, x, target, steps):
    """torch7's formulas in float64 numpy."""
    n = x.size
    scale = np.linspace(0.5, 2, n)
    lr = cfg.get("learningRate", 1e-3)
    wd = cfg.get("weightDecay", 0)
    st: dict = {"t": 0}
    for _ in range(steps):
        if name == "nag" and "d" in st:
            x = x + cfg["momentum"] * st["d"]
        g = (x - target) * scale
        g = g + wd * x
        if name == "sgd":
            mom, damp = cfg.get("momentum", 0), cfg.get("dampening", cfg.get("momentum", 0))
            clr = lr / (1 + st["t"] * cfg.get("learningRateDecay", 0))
            if mom:
                st["d"] = g.copy() if "d" not in st else st["d"] * mom + (1 - damp) * g
                g = g + mom * st["d"] if cfg.get("nesterov") else st["d"]
            x = x - clr * g
        elif name == "adam":
            b1, b2, eps = 0.9, 0.999, 1e-8
            st["m"] = st.get("m", 0) * b1 + (1 - b1) * g
            st["v"] = st.get("v", 0) * b2 + (1 - b2) * g * g
            t = st["t"] + 1
            x = x - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * st["m"] / (np.sqrt(st["v"]) + eps)
        elif name == "rmsprop":
            st["m"] = st.get("m", 0) * 0.99 + 0.01 * g * g
            x = x - lr * g / (np.sqrt(st["m"]) + 1e-8)
        elif name == "adagrad":
            st["w"] = st.get("w", 0) + g * g
            x = x - lr * g / (np.sqrt(st["w"]) + 1e-10)
        elif name == "nag":
            mom = cfg["momentum"]
            st["d"] = st["d"] * mom - lr * g if "d" in st else -lr * g
            x = x - lr * g
        elif name == "adadelta":
            rho, eps = 0.9, 1e-6
            st["w"] = st.get("w", 0) * rho + (1 - rho) * g * g
            d = np.sqrt(st.get("a", 0) + eps) / np.sqrt(st["w"] + eps) * g
            x = x - d
            st["a"] = st.get("a", 0) * rho + (1 - rho) * d * d
        elif name == "adamax":
            b1, b2, eps = 0.9, 0.999, 1e-38
            t = st["t"] + 1
            st["m"] = st.get("m", 0) * b1 + (1 - b1) * g
            st["u"] = np.maximum(st.get("u", 0) * b2, np.abs(g) + eps)
            x = x - lr / (1 - b1 ** t) * st["m"] / st["u"]
        st["t"] += 1
    return x


CONFIGS = [
    ("sgd", {"learningRate": 0.1}),
    ("sgd", {"learningRate": 0.1, "momentum": 0.9, "dampening": 0.1, "weightDecay": 1e-3}),
    ("sgd", {"learningRate": 0.05, "momentum": 0.9, "dampening": 0, "nesterov": True, "learningRateDecay": 0.1}),
    ("adam", {"learningRate": 0.01, "weightDecay": 1e-2}),
    ("rmsprop", {"learningRate": 0.01}),
    ("adagrad", {"learningRate": 0.1}),
    ("nag", {"learningRate": 0.05, "momentum": 0.9}),
    ("adadelta", {}),
    ("adamax", {"learningRate": 0.01}),
]


def _lua_table(cfg):
    items = ", ".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in cfg.items())
    return "{" + items + "}"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, cfg", CONFIGS, ids=[f"{c[0]}{i}" for i, c in enumerate(CONFIGS)])
def test_optim_fused_updates_match_torch7s_formulas(paths, name, cfg, dtype, threads):
    rng = np.random.default_rng(7)
    n, steps = 600_000, 3
    x0, target = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    want = _reference(name, cfg, x0.astype(np.float64), target.astype(np.float64), steps)
    new, runs = _OPTIM(name, _lua_table(cfg), T(x0), T(target), steps, True, threads)
    old, _ = _OPTIM(name, _lua_table(cfg), T(x0), T(target), steps, False, threads)
    # one program a step (Double's on 2 threads only); sgd and nag keep their ops
    fused = 0 if name in ("sgd", "nag") or (threads == 1 and dtype == np.float64) else steps
    assert runs == fused
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(N(new), want, **tol)
    np.testing.assert_allclose(N(new), N(old), **tol)


# ------------------------------------------------------------------------------------------
# Dropout's masks

_DROPOUT = lua_fn("""function(x, go, p, threads, seed, masks, inplace)
  require 'nn'
  local blas = require 'torch.backend.cpu.blas'
  blas.watchLoad = false
  torch.setnumthreads(threads)
  require('torch.backend.cpu.random').masks.enabled = masks
  torch.manualSeed(seed)
  local m = nn.Dropout(p, false, inplace):type(torch.type(x))
  local y = m:forward(inplace and x:clone() or x):clone()
  local gi = m:backward(x, go:clone()):clone()
  local after = torch.random()
  require('torch.backend.cpu.random').masks.enabled = true
  blas.watchLoad = true
  return y, gi, m.noise:clone(), after
end""")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_masks_are_threaded_and_deterministic(paths, dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(1, 2, (64, 4096)).astype(dtype)
    go = rng.uniform(1, 2, (64, 4096)).astype(dtype)
    p = 0.3
    outs = [_DROPOUT(T(x), T(go), p, th, 11, True, False) for th in (1, 2)]
    (y1, g1, n1, r1), (y2, g2, n2, r2) = [(N(a), N(b), N(c), d) for a, b, c, d in outs]
    assert np.array_equal(y1, y2) and np.array_equal(g1, g2) and np.array_equal(n1, n2) and r1 == r2
    kept = n1 != 0
    scale = dtype(1) / dtype(1 - p)
    assert set(np.unique(n1)) == {0, scale}
    assert abs(kept.mean() - 0.7) < 5 * np.sqrt(0.21 / kept.size)          # the draws' mean
    assert abs(kept[:, :2048].mean() - kept[:, 2048:].mean()) < 0.01          # chunks agree
    np.testing.assert_allclose(y1, np.where(kept, x * scale, 0), rtol=1e-6)
    np.testing.assert_allclose(g1, np.where(kept, go * scale, 0), rtol=1e-6)   # the same mask
    # another seed, another mask; in place gives the same values
    y3 = N(_DROPOUT(T(x), T(go), p, 2, 12, True, False)[0])
    assert not np.array_equal(y3, y1)
    y4, g4, _, _ = _DROPOUT(T(x), T(go), p, 2, 11, True, True)
    assert np.array_equal(N(y4), y1) and np.array_equal(N(g4), g1)


def test_small_masks_keep_torch7s_stream():
    x = np.ones(1000, np.float32)
    f = lua_fn("""function(x, masks)
      require('torch.backend.cpu.random').masks.enabled = masks
      torch.manualSeed(5)
      local t = x:clone():bernoulli(0.4)
      require('torch.backend.cpu.random').masks.enabled = true
      return t
    end""")
    assert np.array_equal(N(f(T(x), True)), N(f(T(x), False)))
    big = np.ones(100_000, np.float32)
    on, off = N(f(T(big), True)), N(f(T(big), False))
    assert not np.array_equal(on, off)          # the documented stream difference
    assert abs(on.mean() - 0.4) < 0.01 and abs(off.mean() - 0.4) < 0.01


@pytest.mark.parametrize("module, shape", [
    ("nn.SpatialDropout(0.5)", (4, 64, 32, 32)), ("nn.SpatialDropout(0.5)", (16, 8, 8)),
    ("nn.VolumetricDropout(0.4)", (2, 8, 3, 8, 8)), ("nn.VolumetricDropout(0.4)", (8, 3, 8, 8)),
])
def test_spatial_dropout_scales_whole_planes(module, shape):
    f = lua_fn("""function(src, x, go)
      require 'nn'
      torch.manualSeed(2)
      local m = loadstring('return ' .. src)():float()
      local y = m:forward(x):clone()
      local gi = m:backward(x, go):clone()
      return y, gi, m.noise:clone()
    end""")
    rng = np.random.default_rng(5)
    x, go = rng.uniform(1, 2, shape).astype(np.float32), rng.uniform(1, 2, shape).astype(np.float32)
    y, gi, noise = map(N, f(module, T(x), T(go)))
    assert set(np.unique(noise)) <= {0, 1} and 0 < noise.mean() < 1
    np.testing.assert_array_equal(y, x * noise)          # noise: 1 per plane, broadcast
    np.testing.assert_array_equal(gi, go * noise)


def test_a_forked_child_gets_its_own_workers():
    from luabridge.providers.torch_cpu import blocked
    prog = blocked.Program("x = x * k", ["x"], ["k"])
    a = np.ones(1 << 20)
    blocked.run_program(prog, "Double", a.size, 2, [a.ctypes.data], [2.0])   # the parent's pool
    pid = os.fork()
    if pid == 0:   # the child: the parent's workers are gone; a run must not wait for them
        try:
            blocked.run_program(prog, "Double", a.size, 2, [a.ctypes.data], [3.0])
            os._exit(0 if np.all(a == 6.0) else 1)
        except BaseException:
            os._exit(2)
    import time
    deadline = time.monotonic() + 60
    done, status = os.waitpid(pid, os.WNOHANG)
    while done == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
    if done == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's run waited for the parent's workers")
    assert os.waitstatus_to_exitcode(status) == 0
    assert np.all(a == 2.0)


# ------------------------------------------------------------------------------------------
# the provider itself, on numpy arrays


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_programs_split_into_ranges_of_whole_blocks(threads):
    from luabridge.providers.torch_cpu import blocked
    prog = blocked.Program("y = x; x = -(x - 2.5) * k + sqrt(y) / (y + 1); y = abs(y - x)", ["x", "y"], ["k"])
    n = 3 * (blocked.THREADED_BLOCK_BYTES // 4) + 12345      # a partial last block
    rng = np.random.default_rng(1)
    x0 = rng.uniform(0.1, 3, n).astype(np.float32)
    x, y = x0.copy(), np.zeros(n, np.float32)
    blocked.run_program(prog, "Float", n, threads, [x.ctypes.data, y.ctypes.data], [1.5])
    x64 = x0.astype(np.float64)
    wx = -(x64 - 2.5) * 1.5 + np.sqrt(x64) / (x64 + 1)
    np.testing.assert_allclose(x, wx, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, np.abs(x64 - wx), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype, name", [(np.float32, "Float"), (np.float64, "Double")])
def test_masks_depend_on_the_seed_only(dtype, name):
    from luabridge.providers.torch_cpu import blocked
    n = 5 * blocked.MASK_CHUNK + 77
    got = []
    for threads in (1, 2, 3):
        r = np.full(n, 7, dtype)
        blocked.bernoulli_fill(name, r.ctypes.data, n, 0.25, 123, threads)
        got.append(r)
    assert all(np.array_equal(got[0], g) for g in got[1:])
    assert set(np.unique(got[0])) == {0, 1}
    assert abs(got[0].mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / n)
    # chunk i is its own stream: numpy's documented SeedSequence spawn keys
    first = np.random.Generator(np.random.PCG64(np.random.SeedSequence(123, spawn_key=(1,))))
    u = first.random(blocked.MASK_CHUNK, dtype=dtype)
    np.testing.assert_array_equal(got[0][blocked.MASK_CHUNK:2 * blocked.MASK_CHUNK], (u < dtype(0.25)).astype(dtype))
    other = np.empty(n, dtype)
    blocked.bernoulli_fill(name, other.ctypes.data, n, 0.25, 124, 2)
    assert not np.array_equal(other, got[0])


def test_empty_tensors_keep_the_old_paths(paths):
    f = lua_fn("""function()
      local pw = require('torch.backend.cpu.pointwise').blocked
      local masks = require('torch.backend.cpu.random').masks
      local from, mfrom = pw.from.Float, masks.from
      pw.from.Float, masks.from = 0, 0
      local ok, err = pcall(function()
        local e = torch.FloatTensor()
        e:bernoulli(0.5); e:addcdiv(e, 0.5, e, e)
        return torch.elementwise('x = x * 2', { x = e })
      end)
      pw.from.Float, masks.from = from, mfrom
      return ok, err
    end""")
    assert f() == (True, False)
