"""oneDNN's eltwise, softmax and binary passes for nn's activation, softmax and table modules
(torch.backend.cpu.dnnl_eltwise, picked by backend/cpu/nn_pointwise.lua): every pass on oneDNN
at 1 and 2 threads against numpy float64, PyTorch's functional ops and the modules' own path
(dnnl.enabled false); torch7's semantics at the edges (Threshold's val, HardTanh's bounds,
SoftPlus's threshold, LogSoftMax's stability); in place and non-contiguous operands; Double and
the switch keep the old path; the rule's sizes; finite differences on small cases."""
import numpy as np
import pytest

from helpers import N, lua_fn

try:
    import torch as pytorch
    import torch.nn.functional as F
except ImportError:  # optional reference
    pytorch, F = None, None

available = lua_fn("function() return require('torch.backend.cpu.dnnl').available end")
pytestmark = pytest.mark.skipif(not available(), reason="oneDNN is not installed (pip install 'luabridge[onednn]')")

# Runs nn module `ctor` (Float, or Double) on x with gradient go: returns output, gradInput
# and how many passes ran on oneDNN. path: 'old' (dnnl.enabled false), 1 or 2 (oneDNN forced
# on that many threads, any size) or 'rule' (the measured limits decide, 2 threads allowed).
# opts: words 'double', 'table' (the xs are a table's tensors; gradInput comes back as a list).
_run = lua_fn("""function(path, ctor, opts, go, ...)
  require 'nn'
  local dnnl = require 'torch.backend.cpu.dnnl'
  local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
  local blas = require 'torch.backend.cpu.blas'
  local was, watch, threads = dnnl.enabled, blas.watchLoad, torch.getnumthreads()
  local double = opts:find('double') ~= nil
  local xs = { ... }
  dnnl.enabled = path ~= 'old'
  eltwise.forceThreads = type(path) == 'number' and path or nil
  blas.watchLoad = false
  torch.setnumthreads(2)
  local runs = eltwise.runs
  local ok, out, gi = pcall(function()
    local m = loadstring('return ' .. ctor)()
    if double then m:double() else m:float() end
    local function cast(t) return double and t:double() or t:clone() end
    local input = {}
    for i, x in ipairs(xs) do input[i] = cast(x) end
    if not opts:find('table') then input = input[1] end
    local out = m:forward(input):clone()   -- in place, the input changes in backward
    local gi = m:backward(input, cast(go))
    if torch.isTensor(gi) then return out, { gi:clone() } end
    local r = {}
    for i, v in ipairs(gi) do r[i] = v:clone() end
    return out, r
  end)
  dnnl.enabled, eltwise.forceThreads, blas.watchLoad = was, nil, watch
  torch.setnumthreads(threads)
  if not ok then error(out, 0) end
  return eltwise.runs - runs, out, unpack(gi)
end""")


def run(path, ctor, x, go, *opts):
    """(output, gradInput, oneDNN passes run); x a list for a table input (gradInput a list too)."""
    table = isinstance(x, list)
    runs, out, *gi = _run(path, ctor, " ".join(opts + (("table",) if table else ())), go, *(x if table else [x]))
    return out, (gi if table else gi[0]), runs


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name: (constructor, input range, forward(x), backward(x, y, go)) in float64
ACTIVATIONS = {
    "ReLU": ("nn.ReLU()", (-2, 2), lambda x: np.maximum(x, 0), lambda x, y, g: g * (x > 0)),
    "ReLU inplace": ("nn.ReLU(true)", (-2, 2), lambda x: np.maximum(x, 0), lambda x, y, g: g * (x > 0)),
    "Threshold 0 val": ("nn.Threshold(0, -0.5)", (-2, 2), lambda x: np.where(x > 0, x, -0.5),
                        lambda x, y, g: g * (x > 0)),
    "Threshold 0.3": ("nn.Threshold(0.3, 0.1)", (-2, 2), lambda x: np.where(x > 0.3, x, 0.1),
                      lambda x, y, g: g * (x > 0.3)),
    "LeakyReLU": ("nn.LeakyReLU(0.1)", (-2, 2), lambda x: np.where(x > 0, x, np.float32(0.1) * x),
                  lambda x, y, g: np.where(x > 0, g, np.float32(0.1) * g)),
    "LeakyReLU inplace": ("nn.LeakyReLU(0.2, true)", (-2, 2), lambda x: np.where(x > 0, x, np.float32(0.2) * x),
                          lambda x, y, g: np.where(x > 0, g, np.float32(0.2) * g)),
    "LeakyReLU negative": ("nn.LeakyReLU(-0.5)", (-2, 2), lambda x: np.where(x > 0, x, -0.5 * x),
                           lambda x, y, g: np.where(x > 0, g, -0.5 * g)),
    "ELU": ("nn.ELU(0.7)", (-3, 2), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)),
            lambda x, y, g: np.where(x > 0, g, g * (y + 0.7))),
    "ELU inplace": ("nn.ELU(1, true)", (-3, 2), lambda x: np.where(x > 0, x, np.expm1(x)),
                    lambda x, y, g: np.where(x > 0, g, g * (y + 1))),
    # torch7 reads the output: with alpha < 0, y > 0 where x < 0, and the gradient passes there
    "ELU negative alpha": ("nn.ELU(-0.5)", (-3, 2), lambda x: np.where(x > 0, x, -0.5 * np.expm1(x)),
                           lambda x, y, g: np.where(y > 0, g, g * (y - 0.5))),
    "Tanh": ("nn.Tanh()", (-3, 3), np.tanh, lambda x, y, g: g * (1 - y * y)),
    "Sigmoid": ("nn.Sigmoid()", (-6, 6), sigmoid, lambda x, y, g: g * y * (1 - y)),
    "SoftPlus": ("nn.SoftPlus()", (-30, 30), lambda x: np.where(x > 20, x, np.log1p(np.exp(x))),
                 lambda x, y, g: np.where(x > 20, g, g * sigmoid(x))),
    "SoftPlus beta": ("nn.SoftPlus(2.5)", (-12, 12), lambda x: np.where(2.5 * x > 20, x, np.log1p(np.exp(2.5 * x)) / 2.5),
                      lambda x, y, g: np.where(2.5 * x > 20, g, g * sigmoid(2.5 * x))),
    "SoftPlus threshold 1": ("nn.SoftPlus(1, 1)", (-3, 3), lambda x: np.where(x > 1, x, np.log1p(np.exp(x))),
                             lambda x, y, g: np.where(y > 1, g, g * (1 - np.exp(-y)))),   # from the output
    "Abs": ("nn.Abs()", (-2, 2), np.abs, lambda x, y, g: g * np.sign(x)),
    "Square": ("nn.Square()", (-2, 2), np.square, lambda x, y, g: 2 * x * g),
    "Sqrt": ("nn.Sqrt()", (0, 4), np.sqrt, lambda x, y, g: np.where(y == 0, 0, 0.5 * g / np.where(y == 0, 1, y))),
    "Sqrt eps": ("nn.Sqrt(0.5)", (0, 4), lambda x: np.sqrt(x + 0.5), lambda x, y, g: 0.5 * g / y),
    "Exp": ("nn.Exp()", (-4, 4), np.exp, lambda x, y, g: g * y),
    "Log": ("nn.Log()", (0.05, 4), np.log, lambda x, y, g: g / x),
    "HardTanh": ("nn.HardTanh()", (-2, 2), lambda x: np.clip(x, -1, 1), lambda x, y, g: g * ((x > -1) & (x < 1))),
    "HardTanh inplace": ("nn.HardTanh(-0.5, 0.75, true)", (-2, 2), lambda x: np.clip(x, -0.5, 0.75),
                         lambda x, y, g: g * ((x > -0.5) & (x < 0.75))),
    "ReLU6": ("nn.ReLU6()", (-3, 9), lambda x: np.clip(x, 0, 6), lambda x, y, g: g * ((x > 0) & (x < 6))),
    "Clamp": ("nn.Clamp(-0.25, 0.5)", (-2, 2), lambda x: np.clip(x, -0.25, 0.5),
              lambda x, y, g: g * ((x > -0.25) & (x < 0.5))),
}

# where a pass keeps the old path whatever the switch: (forward, backward)
OLD_ONLY = {"Threshold 0 val": (True, False), "Threshold 0.3": (True, True), "SoftPlus threshold 1": (True, True),
            "SoftPlus": (True, False), "SoftPlus beta": (True, False), "Log": (True, False), "Exp": (True, False),
            "Sqrt": (False, True), "Sqrt eps": (True, True), "ELU negative alpha": (False, True)}

SHAPES = [(37,), (5, 13), (2, 3, 5, 7)]


def operands(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = ACTIVATIONS[name][1]
    x = rng.uniform(lo, hi, shape).astype(np.float32)
    flat = x.reshape(-1)
    # the edges: exact 0s, and HardTanh's bounds themselves
    flat[:3] = [0, lo, hi] if lo >= 0 else [0, -1, 1]
    if name.startswith("HardTanh inplace"):
        flat[1:3] = [-0.5, 0.75]
    elif name == "Clamp":
        flat[1:3] = [-0.25, 0.5]
    elif name == "ReLU6":
        flat[1:3] = [0, 6]
    elif name == "Log":
        flat[0] = 0.5
    go = rng.uniform(-1, 1, shape).astype(np.float32)
    return x, go


def close(got, want, what, rtol=2e-6):
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(N(got).astype(np.float64), want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()),
                               err_msg=what)


@pytest.mark.parametrize("path", [1, 2])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_against_numpy_and_old_path(name, path):
    ctor, _, fwd, bwd = ACTIVATIONS[name]
    old_forward, old_backward = OLD_ONLY.get(name, (False, False))
    for shape in SHAPES:
        x, go = operands(name, shape)
        out, gi, runs = run(path, ctor, x, go)
        x64, go64 = x.astype(np.float64), go.astype(np.float64)
        y = fwd(x64)
        close(out, y, f"{name} {shape} forward")
        close(gi, bwd(x64, N(out).astype(np.float64), go64), f"{name} {shape} backward", rtol=1e-5)
        assert runs == (not old_forward) + (not old_backward), (name, runs)
        old_out, old_gi, old_runs = run("old", ctor, x, go)
        assert old_runs == 0
        close(out, N(old_out), f"{name} {shape}: oneDNN against the old path, forward", rtol=1e-6)
        close(gi, N(old_gi), f"{name} {shape}: oneDNN against the old path, backward", rtol=1e-5)


def test_two_threads_give_one_threads_values():
    for name in ("Tanh", "ELU", "SoftPlus", "Sigmoid", "Exp", "HardTanh"):
        ctor = ACTIVATIONS[name][0]
        x, go = operands(name, (301, 203), seed=3)
        one, two = run(1, ctor, x, go), run(2, ctor, x, go)
        np.testing.assert_array_equal(N(one[0]), N(two[0]), err_msg=name)
        np.testing.assert_array_equal(N(one[1]), N(two[1]), err_msg=name)


@pytest.mark.skipif(pytorch is None, reason="PyTorch is not installed")
def test_activations_against_pytorch():
    t = pytorch.from_numpy
    cases = [("ReLU", F.relu, {}), ("LeakyReLU", F.leaky_relu, {"negative_slope": 0.1}),
             ("ELU", F.elu, {"alpha": 0.7}), ("Tanh", pytorch.tanh, {}), ("Sigmoid", pytorch.sigmoid, {}),
             ("SoftPlus", F.softplus, {"beta": 1, "threshold": 20}), ("SoftPlus beta", F.softplus, {"beta": 2.5, "threshold": 20}),
             ("Abs", pytorch.abs, {}), ("Exp", pytorch.exp, {}), ("Log", pytorch.log, {}),
             ("HardTanh", F.hardtanh, {}), ("ReLU6", F.relu6, {})]
    for name, fn, kw in cases:
        x, go = operands(name, (7, 11), seed=5)
        x[0, :3] += 0.01   # PyTorch's own choices at the kinks (HardTanh's bounds) differ from torch7's
        out, gi, runs = run(2, ACTIVATIONS[name][0], x, go)
        assert runs == 2 - sum(OLD_ONLY.get(name, (False, False)))
        xt = t(x.astype(np.float64)).requires_grad_()
        y = fn(xt, **kw)
        y.backward(t(go.astype(np.float64)))
        close(out, y.detach().numpy(), f"{name} forward against PyTorch")
        close(gi, xt.grad.numpy(), f"{name} backward against PyTorch", rtol=1e-5)


def test_torch7_edges():
    # HardTanh: the gradient is 0 at the bounds themselves, in place too
    x = np.array([-1, -1.0000001, -0.9999999, 0, 0.9999999, 1, 1.0000001], np.float32)
    go = np.ones_like(x)
    for ctor in ("nn.HardTanh()", "nn.HardTanh(-1, 1, true)"):
        out, gi, runs = run(1, ctor, x, go)
        assert runs == 2
        np.testing.assert_array_equal(N(out), np.clip(x, -1, 1))
        np.testing.assert_array_equal(N(gi), [0, 0, 1, 1, 1, 0, 0])
    # Threshold's val, in place and not; ReLU's gradient 0 at 0
    x = np.array([-2, -0.0, 0, 1e-30, 3], np.float32)
    out, gi, _ = run(1, "nn.Threshold(0, -1)", x, go[:5])
    np.testing.assert_array_equal(N(out), np.array([-1, -1, -1, 1e-30, 3], np.float32))
    np.testing.assert_array_equal(N(gi), [0, 0, 0, 1, 1])
    out, gi, _ = run(1, "nn.ReLU(true)", x, go[:5])
    np.testing.assert_array_equal(N(out), np.array([0, 0, 0, 1e-30, 3], np.float32))
    np.testing.assert_array_equal(N(gi), [0, 0, 0, 1, 1])
    # SoftPlus: x itself past the threshold, and its gradient gradOutput, exactly
    x = np.array([20.5, 21, 40, 100, 1e30], np.float32)
    out, gi, runs = run(1, "nn.SoftPlus()", x, go[:5])
    assert runs == 1   # the backward pass
    np.testing.assert_array_equal(N(out), x)
    np.testing.assert_array_equal(N(gi), go[:5])


def test_double_noncontiguous_and_switch_keep_the_old_path():
    x, go = operands("Tanh", (6, 9))
    _, _, runs = run(2, "nn.Tanh()", x, go, "double")
    assert runs == 0   # Double
    strided = lua_fn("""function(x, go)
      require 'nn'
      local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
      eltwise.forceThreads = 2
      local runs = eltwise.runs
      local m = nn.ELU():float()
      local xt, got = x:t(), go:t()
      local out = m:forward(xt):clone()
      local gi = m:backward(xt, got):clone()
      eltwise.forceThreads = nil
      return out, gi, eltwise.runs - runs
    end""")
    out, gi, runs = strided(x, go)
    assert runs == 0
    xt = x.T.astype(np.float64)
    close(out, np.where(xt > 0, xt, np.expm1(xt)), "ELU on a transposed input")
    close(gi, np.where(xt > 0, go.T, go.T * np.exp(xt)), "ELU's gradient on a transposed input", rtol=1e-5)
    _, _, runs = run("old", "nn.ELU()", x, go)
    assert runs == 0
    # eltwise.enabled (LUABRIDGE_NO_DNNL_ELTWISE=1) and a missing library: the old path
    switched = lua_fn("""function(field, x)
      require 'nn'
      local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
      local owner = field == 'available' and require 'torch.backend.cpu.dnnl' or eltwise
      local runs, was = eltwise.runs, owner[field]
      owner[field] = false
      eltwise.forceThreads = 1
      local ok, out = pcall(function() return nn.Tanh():float():forward(x):clone() end)
      owner[field], eltwise.forceThreads = was, nil
      assert(ok, out)
      return out, eltwise.runs - runs
    end""")
    for field in ("enabled", "available"):
        out, runs = switched(field, x)
        assert runs == 0, field
        close(out, np.tanh(x.astype(np.float64)), f"Tanh with {field} false")


rule = lua_fn("""function(group, name, n)
  local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
  local blas = require 'torch.backend.cpu.blas'
  local watch, threads = blas.watchLoad, torch.getnumthreads()
  blas.watchLoad = false
  local picks = {}
  for i, t in ipairs { 1, 2 } do
    torch.setnumthreads(t)
    picks[i] = eltwise.threads(group, name, n) or 0
  end
  blas.watchLoad = watch
  torch.setnumthreads(threads)
  return picks[1], picks[2]
end""")


def test_rule_by_size():
    """The measured limits: ELU's LuaJIT loop loses to oneDNN from small sizes on, numpy's tanh
    only to 2 threads on large ones; below, the old path."""
    assert rule("ef", "ELU", 100) == (0, 0)
    assert rule("ef", "ELU", 100000) == (1, 1)          # a second thread from 2 x 512K elements
    assert rule("ef", "ELU", 2 * 10 ** 6) == (1, 2)
    assert rule("ef", "Tanh", 100000)[0] == 0
    assert rule("ef", "Tanh", 10 ** 7) == (0, 2)
    assert rule("ef", "NoSuchModule", 10 ** 7) == (0, 0)
    for name, size in (("ELU", 50), ("ELU", 70001), ("Tanh", 70001), ("Tanh", 400000)):
        ctor = ACTIVATIONS[name][0]
        x, go = operands(name, (size,), seed=size)
        out, gi, _ = run("rule", ctor, x, go)
        x64 = x.astype(np.float64)
        close(out, ACTIVATIONS[name][2](x64), f"{name} {size} forward by the rule")
        close(gi, ACTIVATIONS[name][3](x64, N(out).astype(np.float64), go.astype(np.float64)),
              f"{name} {size} backward by the rule", rtol=1e-5)


def numeric_gradient(ctor, x, go, eps):
    f = lua_fn("""function(ctor, x)
      require 'nn'
      local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
      eltwise.forceThreads = 1
      local out = loadstring('return ' .. ctor)():float():forward(x:clone()):clone()
      eltwise.forceThreads = nil
      return out
    end""")
    g = np.zeros(x.size)
    for i in range(x.size):
        xp, xm = x.copy().reshape(-1), x.copy().reshape(-1)
        xp[i] += eps
        xm[i] -= eps
        g[i] = ((N(f(ctor, xp.reshape(x.shape))) - N(f(ctor, xm.reshape(x.shape)))) * go).sum() / (2 * eps)
    return g.reshape(x.shape)


@pytest.mark.parametrize("ctor", ["nn.Tanh()", "nn.Sigmoid()", "nn.ELU(0.7)", "nn.SoftPlus(2)", "nn.Exp()", "nn.Square()",
                                  "nn.SoftMax()", "nn.LogSoftMax()"])
def test_finite_differences(ctor):
    rng = np.random.default_rng(7)
    shape = (3, 5)
    x = rng.uniform(-1.5, 1.5, shape).astype(np.float32)
    go = rng.uniform(-1, 1, shape).astype(np.float32)
    _, gi, runs = run(1, ctor, x, go)
    assert runs == (1 if any(k in ctor for k in ("SoftPlus", "Log", "Exp")) else 2)   # their forward passes stay
    np.testing.assert_allclose(N(gi), numeric_gradient(ctor, x, go, 1e-2), rtol=2e-2, atol=2e-3)


# softmax: constructor, shape, class axis (numpy), kind
SOFTMAX = [("nn.SoftMax()", (13,), 0), ("nn.SoftMax()", (5, 17), 1), ("nn.SoftMax()", (6, 3, 5), 0),
           ("nn.SoftMax()", (2, 6, 3, 5), 1), ("nn.LogSoftMax()", (13,), 0), ("nn.LogSoftMax()", (5, 17), 1),
           ("nn.LogSoftMax()", (6, 3, 5), 0), ("nn.LogSoftMax()", (2, 6, 3, 5), 1),
           ("nn.SpatialSoftMax()", (6, 3, 5), 0), ("nn.SpatialSoftMax()", (2, 6, 3, 5), 1),
           ("nn.SpatialLogSoftMax()", (2, 6, 3, 5), 1), ("nn.SpatialSoftMax()", (3, 7, 1, 1), 1),
           ("nn.SoftMax()", (7, 1, 1), 0)]


def softmax_ref(x, axis, log):
    s = x - x.max(axis=axis, keepdims=True)
    ls = s - np.log(np.exp(s).sum(axis=axis, keepdims=True))
    return ls if log else np.exp(ls)


@pytest.mark.parametrize("path", [1, 2])
@pytest.mark.parametrize("ctor,shape,axis", SOFTMAX)
def test_softmax_against_numpy_pytorch_and_old_path(ctor, shape, axis, path):
    rng = np.random.default_rng(len(shape))
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    x.reshape(-1)[0] = 1e4 if path == 1 else -1e4   # stable where exp(x) alone would overflow
    go = rng.uniform(-1, 1, shape).astype(np.float32)
    log = "Log" in ctor
    out, gi, runs = run(path, ctor, x, go)
    # log-softmax's forward pass stays (oneDNN's log is too coarse), and the spatial ones (along
    # an outer dim oneDNN is slower)
    spatial = len(shape) > 2 and np.prod(shape[axis + 1:]) > 1
    assert runs == (0 if spatial else 1 if log else 2)
    x64, go64 = x.astype(np.float64), go.astype(np.float64)
    y = softmax_ref(x64, axis, log)
    p = np.exp(y) if log else y
    if log:
        want = go64 - p * go64.sum(axis=axis, keepdims=True)
    else:
        want = p * (go64 - (go64 * p).sum(axis=axis, keepdims=True))
    close(out, y, f"{ctor} {shape} forward", rtol=2e-6)
    close(gi, want, f"{ctor} {shape} backward", rtol=2e-5)
    assert np.isfinite(N(out)).all()
    old_out, old_gi, _ = run("old", ctor, x, go)
    close(out, N(old_out), f"{ctor} {shape}: oneDNN against the old path", rtol=2e-6)
    close(gi, N(old_gi), f"{ctor} {shape}: oneDNN against the old path, backward", rtol=2e-5)
    if pytorch is not None:
        xt = pytorch.from_numpy(x64).requires_grad_()
        yt = (F.log_softmax if log else F.softmax)(xt, dim=axis)
        yt.backward(pytorch.from_numpy(go64))
        close(out, yt.detach().numpy(), f"{ctor} {shape} against PyTorch")
        close(gi, xt.grad.numpy(), f"{ctor} {shape} backward against PyTorch", rtol=2e-5)


def test_softmin_keeps_its_path():
    x = np.random.default_rng(1).uniform(-2, 2, (4, 9)).astype(np.float32)
    out, _, runs = run(2, "nn.SoftMin()", x, x)
    assert runs == 0
    close(out, softmax_ref(-x.astype(np.float64), 1, False), "SoftMin")


@pytest.mark.parametrize("path", [1, 2])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_tables_against_numpy(count, path):
    rng = np.random.default_rng(count)
    xs = [rng.uniform(-2, 2, (7, 9)).astype(np.float32) for _ in range(count)]
    xs[-1] = xs[-1].reshape(9, 7) if count > 1 else xs[-1]   # same elements, another shape
    go = rng.uniform(-1, 1, (7, 9)).astype(np.float32)
    flat = [x.reshape(-1).astype(np.float64) for x in xs]
    for ctor, inplace in (("nn.CAddTable()", False), ("nn.CAddTable(true)", True), ("nn.CMulTable()", False)):
        out, gi, runs = run(path, ctor, xs, go)
        old_out, old_gi, _ = run("old", ctor, xs, go)
        if "Add" in ctor:
            want, grads = sum(flat), [go.reshape(-1)] * count
            assert runs == (count - 1) + (0 if inplace else count)
        else:
            want = np.prod(flat, axis=0)
            grads = [go.reshape(-1) * np.prod([f for j, f in enumerate(flat) if j != i], axis=0) for i in range(count)]
            assert runs == (count - 1) + count * (count - 1)
        close(N(out).reshape(-1), want, f"{ctor} x{count} forward")
        np.testing.assert_array_equal(N(out), N(old_out))
        for i in range(count):
            assert N(gi[i]).shape == (go.shape if inplace else xs[i].shape)   # in place: gradOutput itself
            close(N(gi[i]).reshape(-1), grads[i], f"{ctor} x{count} gradInput[{i}]")
            np.testing.assert_array_equal(N(gi[i]), N(old_gi[i]))


def test_table_copy_keeps_every_float():
    x = np.array([-0.0, np.nan, np.inf, -np.inf, 1e-45, -3], np.float32)
    _, gi, runs = run(1, "nn.CAddTable()", [x, x], x)
    assert runs == 3
    for g in gi:
        np.testing.assert_array_equal(np.signbit(N(g)), np.signbit(x))
        np.testing.assert_array_equal(N(g), x)


def test_plans_are_bounded():
    many = lua_fn("""function()
      require 'nn'
      local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
      eltwise.forceThreads = 1
      local most = 0
      for n = 1, 400 do
        nn.Tanh():float():forward(torch.FloatTensor(n):uniform())
        most = math.max(most, eltwise.planCount())
      end
      eltwise.forceThreads = nil
      return most
    end""")
    assert 0 < many() <= 256


def test_errors_name_the_module_and_sizes():
    """Checks run before any oneDNN pass (forced on every size here)."""
    fail = lua_fn("""function(code)
      require 'nn'
      local eltwise = require 'torch.backend.cpu.dnnl_eltwise'
      eltwise.forceThreads = 1
      local ok, err = pcall(loadstring(code))
      eltwise.forceThreads = nil
      return ok, tostring(err)
    end""")
    cases = [
        ("nn.Tanh():float():backward(torch.FloatTensor(6):zero(), torch.FloatTensor(5))",
         "nn.Tanh: gradOutput size 5 (5 elements) does not match input size 6 (6 elements)"),
        ("nn.SoftMax():float():backward(torch.FloatTensor(2, 3):zero(), torch.FloatTensor(3, 2))",
         "nn.SoftMax: gradOutput size 3x2 does not match input size 2x3"),
        ("nn.CMulTable():float():forward({torch.FloatTensor(4), torch.FloatTensor(5)})",
         "nn.CMulTable: inconsistent tensor sizes, input[1] is 4 and input[2] is 5"),
        ("nn.CAddTable():float():backward({torch.FloatTensor(4), torch.FloatTensor(4)}, torch.FloatTensor(3))",
         "nn.CAddTable: gradOutput must be a tensor of size 4, got 3"),
    ]
    for code, message in cases:
        ok, err = fail(code)
        assert not ok and message in err, (code, err)


@pytest.mark.parametrize("name", ["ReLU", "LeakyReLU", "ELU", "Tanh", "Sigmoid", "Abs", "Square", "HardTanh", "ReLU6",
                                  "SoftPlus", "Exp", "Log"])
def test_infinite_and_huge_inputs_as_the_old_path(name):
    ctor = ACTIVATIONS[name][0]
    x = np.array([np.inf, -np.inf, 0, -0.0, 1, -1, 1e30, -1e30, 88, -88, 100, -100, 1e-40], np.float32)
    if name == "Log":
        x = np.abs(x)
    go = np.linspace(-1, 1, x.size).astype(np.float32)
    with np.errstate(invalid="ignore"):
        for got, old, what in zip(run(1, ctor, x, go), run("old", ctor, x, go), ("forward", "backward")):
            np.testing.assert_allclose(N(got), N(old), rtol=1e-6, atol=1e-7, err_msg=f"{name} {what}")


def test_nan_inputs():
    """NaN stays NaN through the smooth kinds; ReLU's forward gives 0 for any NaN (torch7's
    x > 0 ? x : 0; the old numpy pass kept a NaN of positive sign)."""
    x = np.array([np.nan, -np.nan, 1, -1], np.float32)
    go = np.ones_like(x)
    for name in ("ELU", "Tanh", "Sigmoid", "Square", "Abs", "Sqrt"):
        out, _, _ = run(1, ACTIVATIONS[name][0], x if name != "Sqrt" else np.abs(x), go)
        assert np.isnan(N(out)[:2]).all(), name
    out, _, _ = run(1, "nn.ReLU()", x, go)
    np.testing.assert_array_equal(N(out), [0, 0, 1, 0])
