"""optim (lua/optim/): every first-order algorithm against a numpy float64 re-implementation of its
update rule, lbfgs converging on Rosenbrock, ConfusionMatrix counts and accuracies, Logger's file
output. cg, lbfgs with lswolfe and polyinterp: test_optim_search.py; FistaLS, cmaes, de, checkgrad:
test_optim_global.py."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import luabridge
from helpers import N, T, lbfgs_direction, lua_fn, with_rosenbrock

# Runs `steps` calls of optim[name] on f(x) = 0.5 x'Ax - b'x from x0 with the config written as a
# Lua table constructor (extra tensors: lrs, wds); returns the iterates (steps x n) and f values.
_RUN = lua_fn("""function(name, config, A, b, x0, steps, lrs, wds)
  require 'optim'
  config = loadstring('return ' .. config)()
  config.learningRates, config.weightDecays = lrs, wds
  local x, grad = x0:clone(), x0.new()
  local function feval(p)
    grad:resize(p:size(1)):mv(A, p):add(-1, b)      -- one gradient buffer, reused as in nn code
    return 0.5 * p:dot(torch.mv(A, p)) - b:dot(p), grad
  end
  local xs, fs = torch.Tensor(steps, x:size(1)), torch.Tensor(steps)
  for i = 1, steps do
    local xr, f = optim[name](feval, x, config)
    assert(xr == x, 'the result must be x itself')
    xs[i]:copy(x); fs[i] = f[1]
  end
  return xs, fs, config
end""")


def _quadratic(rng: np.random.Generator, n: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = rng.standard_normal((n, n))
    return m @ m.T / n + np.eye(n), rng.standard_normal(n), rng.standard_normal(n)


def _run(name: str, config: str, a: np.ndarray, b: np.ndarray, x0: np.ndarray, steps: int,
         lrs: np.ndarray | None = None, wds: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, Any]:
    xs, fs, cfg = _RUN(name, config, a, b, x0, steps, None if lrs is None else T(lrs),
                       None if wds is None else T(wds))
    return N(xs), N(fs), cfg


def _reference(step: Callable[[np.ndarray, np.ndarray, dict, int], np.ndarray], a: np.ndarray,
               b: np.ndarray, x0: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Iterates step(x, grad_fn, state, k) (k = 0, 1, ...); fs: f where each step evaluated it."""
    x, state, xs, fs = x0.copy(), {}, [], []

    def grad(p: np.ndarray) -> np.ndarray:
        fs.append(0.5 * p @ a @ p - b @ p)
        return a @ p - b
    for k in range(steps):
        x = step(x, grad, state, k)
        xs.append(x.copy())
    return np.array(xs), np.array(fs)


# ---- numpy re-implementations of the update rules (Torch7's optim conventions) ----

def sgd(lr=1e-3, lrd=0.0, wd=0.0, mom=0.0, damp=None, nesterov=False, lrs=None, wds=None):
    damp = mom if damp is None else damp

    def step(x, grad, st, k):
        g = grad(x)
        if wd:
            g = g + wd * x
        elif wds is not None:
            g = g + wds * x
        if mom:
            st["v"] = g.copy() if "v" not in st else mom * st["v"] + (1 - damp) * g
            g = g + mom * st["v"] if nesterov else st["v"]
        clr = lr / (1 + k * lrd)
        return x - clr * (lrs * g if lrs is not None else g)
    return step


def nag(lr=1e-3, lrd=0.0, mom=0.9, wd=0.0):
    def step(x, grad, st, k):
        if "v" in st:
            x = x + mom * st["v"]
        g = grad(x) + wd * x
        clr = lr / (1 + k * lrd)
        st["v"] = (mom * st["v"] if "v" in st else 0 * x) - clr * g
        return x - clr * g
    return step


def adagrad(lr=1e-3, lrd=0.0, wd=0.0):
    def step(x, grad, st, k):
        g = grad(x) + wd * x
        st["s"] = st.get("s", 0) + g * g
        return x - lr / (1 + k * lrd) * g / (np.sqrt(st["s"]) + 1e-10)
    return step


def adadelta(rho=0.9, eps=1e-6, wd=0.0):
    def step(x, grad, st, k):
        g = grad(x) + wd * x
        st["v"] = rho * st.get("v", 0) + (1 - rho) * g * g
        delta = np.sqrt(st.get("d", 0) + eps) / np.sqrt(st["v"] + eps) * g
        st["d"] = rho * st.get("d", 0) + (1 - rho) * delta * delta
        return x - delta
    return step


def rmsprop(lr=1e-2, alpha=0.99, eps=1e-8, wd=0.0, m0=0.0):
    def step(x, grad, st, k):
        g = grad(x) + wd * x
        st["m"] = alpha * st.get("m", m0) + (1 - alpha) * g * g
        return x - lr * g / (np.sqrt(st["m"]) + eps)
    return step


def adam(lr=1e-3, lrd=0.0, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    def step(x, grad, st, k):
        g = grad(x) + wd * x
        t = k + 1
        st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
        st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
        clr = lr / (1 + k * lrd)
        return x - clr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * st["m"] / (np.sqrt(st["v"]) + eps)
    return step


def adamax(lr=2e-3, b1=0.9, b2=0.999, eps=1e-38, wd=0.0):
    def step(x, grad, st, k):
        g = grad(x) + wd * x
        st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
        st["u"] = np.maximum(b2 * st.get("u", 0), np.abs(g) + eps)
        return x - lr / (1 - b1 ** (k + 1)) * st["m"] / st["u"]
    return step


def asgd(eta0=1e-4, lam=1e-4, alpha=0.75, t0=1e6):
    def step(x, grad, st, k):
        eta = eta0 / (1 + lam * eta0 * k) ** alpha
        x = x * (1 - lam * eta) - eta * grad(x)
        mu = 1 / max(1, k - t0)
        st["ax"] = x.copy() if mu == 1 else st["ax"] + mu * (x - st["ax"])
        return x
    return step


def rprop(step0=0.1, up=1.2, down=0.5, smax=50.0, smin=1e-6):
    def step(x, grad, st, k):
        g = grad(x)
        delta = st.get("delta", np.zeros_like(x))
        steps = st.get("steps", np.full_like(x, step0))
        turn = np.sign(g * delta)
        steps = np.clip(steps * np.where(turn > 0, up, np.where(turn < 0, down, 1.0)), smin, smax)
        g = np.where(turn < 0, 0.0, g)
        st["delta"], st["steps"] = g, steps
        return x - np.sign(g) * steps
    return step


CASES = [
    ("sgd", "{}", sgd()),
    ("sgd", "{learningRate=0.1, learningRateDecay=0.3, weightDecay=0.05}", sgd(0.1, 0.3, 0.05)),
    ("sgd", "{learningRate=0.05, momentum=0.9}", sgd(0.05, mom=0.9)),
    ("sgd", "{learningRate=0.05, momentum=0.8, dampening=0.3}", sgd(0.05, mom=0.8, damp=0.3)),
    ("sgd", "{learningRate=0.05, momentum=0.9, dampening=0, nesterov=true}",
     sgd(0.05, mom=0.9, damp=0, nesterov=True)),
    ("nag", "{learningRate=0.05}", nag(0.05)),
    ("nag", "{learningRate=0.05, momentum=0.5, learningRateDecay=0.1, weightDecay=0.01}",
     nag(0.05, 0.1, 0.5, 0.01)),
    ("adagrad", "{learningRate=0.3}", adagrad(0.3)),
    ("adagrad", "{learningRate=0.3, learningRateDecay=0.2, weightDecay=0.1}", adagrad(0.3, 0.2, 0.1)),
    ("adadelta", "{}", adadelta()),
    ("adadelta", "{rho=0.5, eps=1e-3, weightDecay=0.1}", adadelta(0.5, 1e-3, 0.1)),
    ("rmsprop", "{}", rmsprop()),
    ("rmsprop", "{learningRate=0.05, alpha=0.8, epsilon=1e-4, weightDecay=0.1, initialMean=0.5}",
     rmsprop(0.05, 0.8, 1e-4, 0.1, 0.5)),
    ("adam", "{}", adam()),
    ("adam", "{learningRate=0.1, learningRateDecay=0.1, beta1=0.5, beta2=0.9, epsilon=1e-3, weightDecay=0.2}",
     adam(0.1, 0.1, 0.5, 0.9, 1e-3, 0.2)),
    ("adamax", "{}", adamax()),
    ("adamax", "{learningRate=0.1, beta1=0.5, beta2=0.7, epsilon=1e-3, weightDecay=0.1}",
     adamax(0.1, 0.5, 0.7, 1e-3, 0.1)),
    ("asgd", "{}", asgd()),
    ("asgd", "{eta0=0.2, lambda=0.5, alpha=0.6, t0=2}", asgd(0.2, 0.5, 0.6, 2)),
    ("rprop", "{}", rprop()),
    ("rprop", "{stepsize=0.3, etaplus=2, etaminus=0.25, stepsizemax=0.5, stepsizemin=0.2}",
     rprop(0.3, 2, 0.25, 0.5, 0.2)),
]


@pytest.mark.parametrize("name, config, rule", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_update_rule(lua, rng, name, config, rule):
    a, b, x0 = _quadratic(rng)
    xs, fs, _ = _run(name, config, a, b, x0, 6)
    ref_xs, ref_fs = _reference(rule, a, b, x0, 6)
    np.testing.assert_allclose(xs, ref_xs, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fs, ref_fs, rtol=1e-10, atol=1e-12)


def test_sgd_per_element_rates_and_decays(lua, rng):
    a, b, x0 = _quadratic(rng)
    lrs, wds = rng.uniform(0.01, 0.2, 5), rng.uniform(0, 0.3, 5)
    xs, _, _ = _run("sgd", "{learningRate=0.5, momentum=0.5}", a, b, x0, 5, lrs=lrs, wds=wds)
    ref, _ = _reference(sgd(0.5, mom=0.5, lrs=lrs, wds=wds), a, b, x0, 5)
    np.testing.assert_allclose(xs, ref, rtol=1e-10)


def test_state_fields_as_torch7(lua, rng):
    a, b, x0 = _quadratic(rng)
    _, _, cfg = _run("sgd", "{learningRate=0.1, momentum=0.9}", a, b, x0, 3)
    assert cfg["evalCounter"] == 3 and N(cfg["dfdx"]).shape == (5,)
    _, _, cfg = _run("adam", "{}", a, b, x0, 4)
    assert cfg["t"] == 4 and all(cfg[k] is not None for k in ("m", "v", "denom"))
    _, _, cfg = _run("adagrad", "{}", a, b, x0, 2)
    assert cfg["evalCounter"] == 2 and cfg["paramVariance"] is not None


def test_asgd_average_and_state(lua, rng):
    # the third result is the running average of the iterates from step t0 on
    a, b, x0 = _quadratic(rng)
    ax, cfg = lua_fn("""function(A, b, x0)
      require 'optim'
      local config, x, ax = {eta0 = 0.3, t0 = 3}, x0:clone()
      local function feval(p) return 0, torch.mv(A, p) - b end
      for i = 1, 7 do _, _, ax = optim.asgd(feval, x, config) end
      return ax, config
    end""")(a, b, x0)
    ref_xs, _ = _reference(asgd(0.3, t0=3), a, b, x0, 7)
    # steps 1..5 take mu = 1 (ax = x); then mu = 1/2, 1/3: the mean of x5, x6, x7
    np.testing.assert_allclose(N(ax), ref_xs[4:].mean(0), rtol=1e-12)
    assert cfg["t"] == 7 and cfg["mu_t"] == pytest.approx(1 / 4) and cfg["lambda"] == 1e-4
    assert cfg["eta_t"] == pytest.approx(0.3 / (1 + 1e-4 * 0.3 * 7) ** 0.75, rel=1e-14)


def test_rprop_state_and_steps_per_call(lua, rng):
    a, b, x0 = _quadratic(rng)
    x, fs, cfg = lua_fn("""function(A, b, x0)
      require 'optim'
      local config, x = {niter = 4}, x0:clone()
      local function feval(p) return 0.5 * p:dot(torch.mv(A, p)) - b:dot(p), torch.mv(A, p) - b end
      local _, fs = optim.rprop(feval, x, config)
      return x, fs, config
    end""")(a, b, x0)
    ref_xs, ref_fs = _reference(rprop(), a, b, x0, 4)
    np.testing.assert_allclose(N(x), ref_xs[-1], rtol=1e-12)
    np.testing.assert_allclose([fs[i] for i in range(1, 5)], ref_fs, rtol=1e-12)
    # with state == config, config.stepsize becomes the tensor of per-element steps, as torch7
    assert N(cfg["stepsize"]).shape == (5,) and N(cfg["delta"]).shape == (5,)
    assert all(cfg[m] is not None for m in ("psign", "nsign", "zsign", "dminmax"))


def test_separate_state_table(lua):
    # state given apart from config: the config stays untouched, the state keeps the buffers
    cfg, st = lua_fn("""function()
      require 'optim'
      local config, state = {learningRate = 0.1, momentum = 0.5}, {}
      local x = torch.Tensor{1, 2}
      for i = 1, 2 do optim.sgd(function(p) return p:dot(p), p * 2 end, x, config, state) end
      return config, state
    end""")()
    assert cfg["evalCounter"] is None and cfg["dfdx"] is None
    assert st["evalCounter"] == 2 and st["dfdx"] is not None


def test_float_tensors(lua, rng):
    a, b, x0 = (v.astype(np.float32) for v in _quadratic(rng))
    xs, _, _ = _run("adam", "{learningRate=0.01}", a, b, x0, 3)
    ref, _ = _reference(adam(0.01), a.astype(np.float64), b.astype(np.float64), x0.astype(np.float64), 3)
    np.testing.assert_allclose(xs, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name, config, message", [
    ("sgd", "{momentum=0.9, nesterov=true}", "Nesterov momentum requires a momentum and zero dampening"),
    ("sgd", "{nesterov=true, dampening=0}", "Nesterov momentum requires a momentum and zero dampening"),
    ("nag", "{momentum=0}", "Momentum must be positive for Nesterov Accelerated Gradient"),
])
def test_config_errors(lua, rng, name, config, message):
    a, b, x0 = _quadratic(rng)
    with pytest.raises(luabridge.LuaError, match=message):
        _run(name, config, a, b, x0, 1)


# ---- lbfgs ----

_ROSENBROCK = lua_fn(with_rosenbrock("""function(config, x0, calls)
  require 'optim'
  config = loadstring('return ' .. config)()
  local evals = 0
  local function rosenbrock(x)
    evals = evals + 1
    return rosenbrock_fg(x)
  end
  local x, hist, n = x0:clone()
  for i = 1, calls do x, hist, n = optim.lbfgs(rosenbrock, x, config) end
  local fs = torch.Tensor(#hist)
  for i, f in ipairs(hist) do fs[i] = f end
  return x, fs, n, evals, config
end"""))


def test_lbfgs_converges_on_rosenbrock(lua):
    x, fs, _, evals, cfg = _ROSENBROCK("{maxIter=500, tolX=1e-12, tolFun=1e-12}", T(np.array([-1.2, 1.0, -0.5, 0.8])), 1)
    np.testing.assert_allclose(N(x), np.ones(4), atol=1e-5)
    fs = N(fs)
    x0 = np.array([-1.2, 1.0, -0.5, 0.8])
    assert fs[0] == pytest.approx(100 * np.sum((x0[1:] - x0[:-1] ** 2) ** 2) + np.sum((1 - x0[:-1]) ** 2))
    assert fs[-1] < 1e-10 and cfg["funcEval"] == evals and cfg["nIter"] >= 1


def _lbfgs_reference(f_and_g, x, max_iter, lr=1.0, n_corr=100, tol_fun=1e-5, tol_x=1e-9):
    """torch7's lbfgs with fixed steps, written from its description (one call)."""
    f, g = f_and_g(x)
    hist, s_list, y_list, hdiag, d, t, g_old, f_old = [f], [], [], 1.0, None, None, None, None
    if np.abs(g).sum() <= tol_fun:
        return x, hist
    for it in range(1, max_iter + 1):
        d, hdiag = lbfgs_direction(g, g_old, d, t, it == 1, s_list, y_list, hdiag, n_corr)
        g_old, f_old = g.copy(), f
        if g @ d > -tol_x:
            break
        t = min(1.0, 1.0 / np.abs(g).sum()) * lr if it == 1 else lr
        x = x + t * d
        if it != max_iter:
            f, g = f_and_g(x)
            hist.append(f)
        if it == max_iter or len(hist) >= max_iter * 1.25 or np.abs(g).sum() <= tol_fun \
                or np.abs(d * t).sum() <= tol_x or abs(f - f_old) < tol_x:
            break
    return x, hist


def test_lbfgs_fixed_steps_match_reference(lua):
    def rosen(x):
        r = x[1:] - x[:-1] ** 2
        g = np.zeros_like(x)
        g[:-1] += -400 * x[:-1] * r - 2 * (1 - x[:-1])
        g[1:] += 200 * r
        return 100 * r @ r + (1 - x[:-1]) @ (1 - x[:-1]), g
    x0 = np.array([-1.2, 1.0, 0.3])
    x, fs, n, _, _ = _ROSENBROCK("{maxIter=12, learningRate=0.05, nCorrection=3}", T(x0.copy()), 1)
    ref_x, ref_hist = _lbfgs_reference(rosen, x0, 12, lr=0.05, n_corr=3)
    np.testing.assert_allclose(N(x), ref_x, rtol=1e-9)
    np.testing.assert_allclose(N(fs), ref_hist, rtol=1e-9)
    assert n == len(ref_hist)


def test_lbfgs_resumes_from_state(lua):
    # two calls of 5 iterations continue the same run (the state keeps directions and step)
    x, _, _, _, cfg = _ROSENBROCK("{maxIter=5, learningRate=0.05}", T(np.array([-1.2, 1.0])), 2)
    assert cfg["nIter"] == 10 and len(cfg["old_dirs"]) > 1


def test_lbfgs_with_lswolfe_converges(lua):
    x, fs, n, evals, cfg = _ROSENBROCK("{maxIter=200, lineSearch=optim.lswolfe}", T(np.array([-1.2, 1.0, -0.5, 0.8])), 1)
    np.testing.assert_allclose(N(x), np.ones(4), atol=1e-4)
    assert N(fs)[-1] < 1e-8 and n == evals == cfg["funcEval"]


@pytest.mark.parametrize("t0", [1e-3, 1.0, 30.0])
def test_lswolfe_step_satisfies_strong_wolfe(lua, rng, t0):
    a, b, x0 = _quadratic(rng)
    f, g, x, t, evals = lua_fn("""function(A, b, x0, t0)
      require 'optim'
      local function feval(p) return 0.5 * p:dot(torch.mv(A, p)) - b:dot(p), torch.mv(A, p) - b end
      local x = x0:clone()
      local f, g = feval(x)
      local d = -g
      local f1, g1, x1, t, n = optim.lswolfe(feval, x, t0, d, f, g, g:dot(d))
      return f1, g1, x1, t, n
    end""")(a, b, x0, t0)
    d = -(a @ x0 - b)
    f0, gtd = 0.5 * x0 @ a @ x0 - b @ x0, (a @ x0 - b) @ d
    xn = x0 + t * d
    np.testing.assert_allclose(N(x), xn, rtol=1e-12)
    assert f == pytest.approx(0.5 * xn @ a @ xn - b @ xn, rel=1e-12)
    np.testing.assert_allclose(N(g), a @ xn - b, rtol=1e-10, atol=1e-12)
    assert f <= f0 + 1e-4 * t * gtd                       # sufficient decrease
    assert abs((a @ xn - b) @ d) <= 0.9 * abs(gtd)        # curvature (strong)
    assert 1 <= evals <= 20


def _cubic_min(pts: np.ndarray, lo: float, hi: float) -> tuple[float, float]:
    """Minimiser over [lo, hi] of the cubic through two (x, f, f') points (numpy, global
    coordinates), and the cubic's value there."""
    (x1, f1, g1), (x2, f2, g2) = pts
    m = np.array([[x ** 3, x ** 2, x, 1] for x in (x1, x2)] + [[3 * x ** 2, 2 * x, 1, 0] for x in (x1, x2)])
    coef = np.linalg.solve(m, [f1, f2, g1, g2])
    crit = [r.real for r in np.roots(np.polyder(coef)) if abs(r.imag) < 1e-12]
    cands = [c for c in [lo, hi, x1, x2] + crit if lo <= c <= hi]
    best = min(cands, key=lambda c: np.polyval(coef, c))
    return best, np.polyval(coef, best)


def _closed_form(pts: list) -> float:
    """torch7's unbounded two-point formula, the low point being the one of smaller x."""
    (xl, fl, gl), (xh, fh, gh) = sorted(pts, key=lambda p: p[0])
    d1 = gl + gh - 3 * (fl - fh) / (xl - xh)
    if d1 ** 2 - gl * gh < 0:
        return (xl + xh) / 2
    d2 = np.sqrt(d1 ** 2 - gl * gh)
    return min(max(xh - (xh - xl) * ((gh + d2 - d1) / (gh - gl + 2 * d2)), xl), xh)


def test_polyinterp(lua, rng):
    interp = lua_fn("function(p, lo, hi) require 'optim'; return optim.polyinterp(p, lo, hi) end")
    for _ in range(20):
        pts = np.array([[rng.uniform(-1, 0), rng.normal(), rng.normal()],
                        [rng.uniform(0.5, 2), rng.normal(), rng.normal()]])
        lo, hi = pts[0, 0] - rng.uniform(0, 1), pts[1, 0] + rng.uniform(0, 3)
        pos, value = interp(T(pts), lo, hi)
        ref_pos, ref_value = _cubic_min(pts, lo, hi)
        assert pos == pytest.approx(ref_pos, rel=1e-9, abs=1e-12)
        assert value == pytest.approx(ref_value, rel=1e-9, abs=1e-12)
    # without bounds: torch7's closed form, clamped as min(max(t, x_low), x_high), whichever
    # order the rows come in and whichever point has the lower value
    for pts in ([[0.0, 0.8, -1.0], [2.0, 1.0, 0.5]], [[2.0, 1.0, 0.5], [0.0, 0.8, -1.0]],
                [[0.0, 1.0, -1.0], [2.0, 0.8, 0.5]], [[2.0, 0.8, 0.5], [0.0, 1.0, -1.0]],
                [[0.0, 1.0, 2.0], [1.0, 2.5, 2.0]]):   # the last: complex roots, the midpoint
        assert interp(T(np.array(pts))) == pytest.approx(_closed_form(pts), rel=1e-12)
    # the rows ordered by value disagree with the rows ordered by x: the result is by x
    pts = [[1.0, 0.2, 3.0], [0.0, 1.0, -2.0]]
    (xl, fl, gl), (xh, fh, gh) = pts                   # the wrong (by value) reading
    d1 = gl + gh - 3 * (fl - fh) / (xl - xh)
    d2 = np.sqrt(d1 ** 2 - gl * gh)
    by_value = min(max(xh - (xh - xl) * ((gh + d2 - d1) / (gh - gl + 2 * d2)), xl), xh)
    assert interp(T(np.array(pts))) == pytest.approx(_closed_form(pts), rel=1e-12) != by_value
    with pytest.raises(luabridge.LuaError, match=r"expecting an N x 3 tensor \(N >= 2\) of points"):
        interp(T(np.zeros((3, 2))))


# ---- ConfusionMatrix ----

_CONF = lua_fn("""function(classes, preds, targets, mode)
  require 'optim'
  local c = optim.ConfusionMatrix(classes)
  if mode == 'batch' then c:batchAdd(preds, targets)
  elseif mode == 'scores' then for i = 1, preds:size(1) do c:add(preds[i], targets[i]) end
  else for i = 1, preds:size(1) do c:add(preds[i], targets[i]) end end
  c:updateValids()
  return c.mat, c.valids, c.unionvalids, c.totalValid, c.averageValid, c.averageUnionValid, tostring(c)
end""")


def _conf_reference(k, preds, targets):
    mat = np.zeros((k, k), dtype=np.int64)
    for p, t in zip(preds, targets):
        if t >= 1:
            mat[t - 1, p - 1] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        valids = np.diag(mat) / mat.sum(1)
        union = np.diag(mat) / (mat.sum(1) + mat.sum(0) - np.diag(mat))
    ok = ~np.isnan(valids)
    return mat, valids, union, np.trace(mat) / mat.sum(), valids[ok].mean(), union[ok & ~np.isnan(union)].mean()


@pytest.mark.parametrize("mode", ["single", "batch", "scores", "batch_scores"])
def test_confusion_matrix(lua, rng, mode):
    k, n = 4, 60
    targets = rng.integers(1, k + 1, n)
    preds = np.where(rng.random(n) < 0.6, targets, rng.integers(1, k + 1, n))
    preds[preds == 3] = 2                      # class 3 never predicted: its IoU row still defined
    targets[targets == 4] = 1                  # class 4 never a target: its recall is NaN
    classes = luabridge.eval("{'a', 'b', 'c', 'd'}")
    if mode in ("scores", "batch_scores"):     # one-hot targets, score vectors as predictions
        scores = rng.random((n, k)) * 0.5
        scores[np.arange(n), preds - 1] = 1.0
        onehot = np.eye(k)[targets - 1]
        lp, lt = T(scores), T(onehot)
    else:
        lp, lt = T(preds.astype(np.float64)), T(targets.astype(np.float64))
    out = _CONF(classes, lp, lt, "batch" if mode.startswith("batch") else mode)
    mat, valids, union, total, avg, avg_union = _conf_reference(k, preds, targets)
    np.testing.assert_array_equal(N(out[0]), mat)
    np.testing.assert_allclose(N(out[1]), valids, rtol=1e-6)
    np.testing.assert_allclose(N(out[2]), union, rtol=1e-6)
    assert out[3] == pytest.approx(total) and out[4] == pytest.approx(avg, rel=1e-6)
    assert out[5] == pytest.approx(avg_union, rel=1e-6)


def test_confusion_matrix_ignores_nonpositive_targets(lua):
    out = _CONF(2, T(np.array([1.0, 2.0, 2.0])), T(np.array([1.0, 0.0, 2.0])), "batch")
    np.testing.assert_array_equal(N(out[0]), [[1, 0], [0, 1]])


def test_confusion_matrix_printing(lua):
    out = _CONF(luabridge.eval("{'cat', 'dog'}"), T(np.array([1.0, 1.0, 2.0, 2.0, 1.0])),
                T(np.array([1.0, 1.0, 2.0, 1.0, 2.0])), "single")
    # valids are float32 (a FloatTensor, as torch7); Lua prints numbers with %.14g
    recall = [float(np.float32(2 / 3)), 0.5]
    iou = [float(np.float32(0.5)), float(np.float32(1 / 3))]
    expected = ("ConfusionMatrix:\n"
                "[[       2       1]   66.667% \t[class: cat]\n"
                " [       1       1]]  50.000% \t[class: dog]\n"
                f" + average row correct: {sum(recall) / 2 * 100:.14g}% \n"
                f" + average rowUcol correct (VOC measure): {sum(iou) / 2 * 100:.14g}% \n"
                " + global correct: 60%")
    assert out[6] == expected
    unnamed = _CONF(2, T(np.array([1.0])), T(np.array([1.0])), "single")[6]
    assert unnamed.splitlines()[1] == "[[       1       0]   100.000% "


def test_confusion_matrix_far_frr(lua, rng):
    mat = rng.integers(0, 6, (5, 5))
    mat[2] = 0                                   # a class without samples
    out = lua_fn("""function(m)
      require 'optim'
      local c = optim.ConfusionMatrix(5)
      c.mat:copy(m)
      return c:farFrr()
    end""")(mat.astype(np.int64))
    rows = mat.sum(1)
    has = rows > 0
    frr = np.where(has, 1 - np.diag(mat) / np.maximum(rows, 1), -1.0)
    far = np.full(5, -1.0)
    for c in np.flatnonzero(has):
        others = [k for k in np.flatnonzero(has) if k != c]
        far[c] = np.mean([mat[k, c] / rows[k] for k in others])
    np.testing.assert_allclose(N(out[0]), frr, rtol=1e-12)
    np.testing.assert_allclose(N(out[1]), far, rtol=1e-12)
    np.testing.assert_allclose(N(out[2]), frr[has], rtol=1e-12)
    np.testing.assert_allclose(N(out[3]), far[has], rtol=1e-12)


def test_confusion_matrix_errors(lua):
    with pytest.raises(luabridge.LuaError, match=r"target must be a class index in \[1, 3\], got 5"):
        _CONF(3, T(np.array([1.0])), T(np.array([5.0])), "single")
    with pytest.raises(luabridge.LuaError, match=r"prediction must be a class index in \[1, 3\], got 0"):
        _CONF(3, T(np.array([0.0])), T(np.array([1.0])), "single")
    with pytest.raises(luabridge.LuaError, match="predictions has invalid number of dimensions"):
        _CONF(3, T(np.zeros((2, 2, 2))), T(np.ones(2)), "batch")
    with pytest.raises(luabridge.LuaError, match=r"class indices must be in \[1, 3\]"):
        _CONF(3, T(np.array([4.0])), T(np.array([1.0])), "batch")


# ---- Logger ----

def test_logger_writes_named_columns(lua, tmp_path: Path, capfd):
    """Without a gnuplot package (here made unloadable), plot notes it once; the file has the data."""
    path = tmp_path / "sub" / "dir" / "train.log"
    lua_fn("""function(path)
      require 'optim'
      local loaded, preload = package.loaded.gnuplot, package.preload.gnuplot
      package.loaded.gnuplot, package.preload.gnuplot = nil, function() error('no gnuplot here') end
      local log = optim.Logger(path)
      log:setNames{'train error', 'test error'}
      log:add{0.5, 0.25}
      log:add{1234.5, 'n/a'}
      log:style{'-', '+'}
      log:plot()
      log:plot()
      package.loaded.gnuplot, package.preload.gnuplot = loaded, preload
    end""")(str(path))
    lines = path.read_text().splitlines()
    assert lines == ["train error\ttest error\t", " 5.0000e-01\t 2.5000e-01\t", " 1.2345e+03\tn/a\t"]
    assert capfd.readouterr().out.count("plotting is not available") == 1


def test_logger_keys_from_first_row(lua, tmp_path: Path):
    path = tmp_path / "k.log"
    lua_fn("""function(path)
      require 'optim'
      local log = optim.Logger(path)
      log:add{loss = 3, acc = 0.5, lr = 0.1}
      log:add{lr = 0.2, acc = 0.75, loss = 2}     -- columns stay in the header's order
      local ok, err = pcall(log.add, log, {loss = {}})
      assert(not ok and err:find('can only log numbers and strings'))
    end""")(str(path))
    header, *rows = path.read_text().splitlines()
    names = header.split("\t")[:-1]
    assert sorted(names) == ["acc", "loss", "lr"]
    expected = [{"loss": 3, "acc": 0.5, "lr": 0.1}, {"loss": 2, "acc": 0.75, "lr": 0.2}]
    assert [[float(v) for v in row.split("\t")[:-1]] for row in rows] == \
        [[e[n] for n in names] for e in expected]


def test_logger_plot_through_gnuplot(lua, tmp_path: Path):
    # a recording stand-in for the gnuplot package: plot() makes torch7's calls, screen then eps
    calls = lua_fn("""function(path)
      require 'optim'
      local calls = {}
      package.loaded.gnuplot = nil
      package.preload.gnuplot = function()
        return setmetatable({}, {__index = function(_, name)
          return function(...) calls[#calls + 1] = {name, ...}; return name == 'figure' and 7 or 'eps' end
        end})
      end
      local log = optim.Logger(path)
      log:setNames{'train', 'test'}
      for i = 1, 3 do log:add{i, 10 * i} end
      log:style{'-', {'+', '~'}}
      log:setlogscale(true)
      log:plot()
      local screen = #calls
      log:display(false)
      log:plot('test')
      package.preload.gnuplot, package.loaded.gnuplot = nil, nil
      return calls, screen, log.figure
    end""")(str(tmp_path / "t.log"))
    calls, screen, figure = calls
    names = [calls[i][1] for i in range(1, len(calls) + 1)]
    draw = ["logscale", "plot", "grid", "title"]
    assert names == ["figure", *draw, "epsfigure", *draw, "close", "epsfigure", *draw, "close"]
    assert screen == 11 and figure == 7
    series = calls[3][2]                  # the screen plot's {name, values, style} entries
    got = [(series[i][1], N(series[i][2]).tolist(), series[i][3]) for i in range(1, len(series) + 1)]
    assert got == [("train", [1.0, 2.0, 3.0], "-"), ("test", [10.0, 20.0, 30.0], "+"),
                   ("test", [10.0, 20.0, 30.0], "~")]
    assert calls[6][2] == str(tmp_path / "t.log") + ".eps" and calls[5][2] == "<Logger::" + str(tmp_path / "t.log") + ">"
    only_test = calls[14][2]
    assert [only_test[i][1] for i in range(1, len(only_test) + 1)] == ["test", "test"]


@pytest.mark.parametrize("name", ["sgd", "asgd", "nag", "adagrad", "adadelta", "rmsprop", "rprop", "adam",
                                  "adamax", "cg", "lbfgs", "checkgrad"])
def test_gradient_size_errors(lua, name):
    with pytest.raises(luabridge.LuaError, match=rf"optim.{name}: opfunc must return f\(x\) and df/dx with "
                                                 r"as many elements as x \(2\), got 3 elements"):
        lua_fn("""function(name)
          require 'optim'
          optim[name](function(x) return 1, torch.zeros(3) end, torch.zeros(2), {})
        end""")(name)


def test_confusion_matrix_two_dimensional_prediction(lua, rng):
    """torch7's add takes the max over dimension 1 of a 2-D prediction: a 1 x K output (nn.Reshape's
    batch of one for a 1 x 32 x 32 image) counts as class 1, an N x K one adds one at each distinct row
    index of the column-wise argmax (torch7's mat[t][p] = mat[t][p] + 1 with a LongTensor p)."""
    scores = rng.random((1, 5))
    scores[0, 3] = 2.0
    out = _CONF(5, T(np.stack([scores, scores])), T(np.array([4.0, 2.0])), "scores")
    expected = np.zeros((5, 5), dtype=np.int64)
    expected[3, 0] = expected[1, 0] = 1
    np.testing.assert_array_equal(N(out[0]), expected)
    block = rng.random((3, 5))
    rows = set(np.argmax(block, 0) + 1)
    out = _CONF(5, T(block[None]), T(np.array([2.0])), "scores")
    expected = np.zeros((5, 5), dtype=np.int64)
    for r in rows:
        expected[1, r - 1] = 1
    np.testing.assert_array_equal(N(out[0]), expected)
    ignored = _CONF(5, T(scores[None]), T(np.array([0.0])), "scores")
    assert N(ignored[0]).sum() == 0
    # a one-hot target vector (the tutorials' mse loss) is its argmax, the prediction still a row
    onehot = np.zeros((1, 5))
    onehot[0, 2] = 1.0
    out = _CONF(5, T(scores[None]), T(onehot), "scores")
    expected = np.zeros((5, 5), dtype=np.int64)
    expected[2, 0] = 1
    np.testing.assert_array_equal(N(out[0]), expected)
