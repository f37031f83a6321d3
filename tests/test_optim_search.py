"""optim's line-search methods against numpy float64 re-implementations written from torch7's
optim: polyinterp (N points), lbfgs with lswolfe (the same evaluations, one by one) and cg
(Rasmussen's minimize.m); and their results on Rosenbrock and quadratics (known minima)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import luabridge
from helpers import N, T, lbfgs_direction, lua_fn, with_rosenbrock

Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]


def rosenbrock(x: np.ndarray) -> tuple[float, np.ndarray]:
    """Rounded as the Lua objective below rounds (the runs are chaotic: rounding shows)."""
    r = x[1:] - x[:-1] * x[:-1]
    g = np.zeros_like(x)
    g[:-1] += -400 * (x[:-1] * r)
    g[:-1] += -2 * (1 - x[:-1])
    g[1:] += 200 * r
    return float(100 * (r @ r) + (1 - x[:-1]) @ (1 - x[:-1])), g


# Runs optim[name](rosenbrock, x0, config) once; returns x, the values as a tensor, the third
# result, the number of evaluations, the (x, f) of each evaluation, and the config afterwards.
_RUN = lua_fn(with_rosenbrock("""function(name, config, x0)
  require 'optim'
  config = loadstring('return ' .. config)()
  local points, values = {}, {}
  local function feval(x)
    local f, g = rosenbrock_fg(x)
    points[#points + 1], values[#values + 1] = x:clone(), f
    return f, g
  end
  local x, hist, third = optim[name](feval, x0:clone(), config)
  return x, torch.Tensor(hist), third, #points, torch.cat(points, 1):view(#points, -1),
         torch.Tensor(values), config
end"""))


class Counted:
    """An objective that records every point it is evaluated at."""

    def __init__(self, fn: Objective):
        self.fn, self.points = fn, []

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        self.points.append(x.copy())
        return self.fn(x)


# ---- torch7's algorithms, re-implemented in numpy ----

def polyinterp(points: np.ndarray, lo: float | None = None, hi: float | None = None) -> tuple[float, float]:
    """The minimiser, and the interpolant's value there (nan for the closed form)."""
    x, f, g = points[:, 0], points[:, 1], points[:, 2]
    if len(x) == 2 and lo is None and hi is None:
        a, b = (0, 1) if x[0] <= x[1] else (1, 0)          # a: the point of smaller x
        d1 = g[a] + g[b] - 3 * (f[a] - f[b]) / (x[a] - x[b])
        disc = d1 * d1 - g[a] * g[b]
        if disc < 0:
            return float(np.mean(x)), np.nan
        d2 = np.sqrt(disc)
        t = x[b] - (x[b] - x[a]) * ((g[b] + d2 - d1) / (g[b] - g[a] + 2 * d2))
        return float(min(max(t, x[a]), x[b])), np.nan
    lo = x.min() if lo is None else lo
    hi = x.max() if hi is None else hi
    order = 2 * len(x) - 1
    powers = np.arange(order, -1, -1)
    rows = [xi ** powers for xi in x] + [powers * xi ** np.maximum(powers - 1, 0) for xi in x]
    coef = np.linalg.solve(np.array(rows), np.concatenate([f, g]))
    coef[np.abs(coef) <= 1e-12] = 0
    slope = np.polyder(coef) if np.any(coef[:-1]) else np.zeros(1)
    roots = [r.real for r in np.roots(slope) if r.imag == 0]
    best, fbest = (lo + hi) / 2, np.inf
    for c in [lo, hi, *x, *roots]:
        if lo <= c <= hi and np.polyval(coef, c) < fbest:
            best, fbest = c, np.polyval(coef, c)
    return float(best), float(fbest)


def lswolfe(fn: Objective, x: np.ndarray, t: float, d: np.ndarray, f: float, g: np.ndarray, gtd: float,
            c1: float = 1e-4, c2: float = 0.9, tol_x: float = 1e-9, max_iter: int = 20):
    x0 = x.copy()

    def at(step):
        fv, gv = fn(x0 + step * d)
        return fv, gv, gv @ d
    f_new, g_new, gtd_new = at(t)
    evals, it, done = 1, 0, False
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g.copy(), gtd
    br = brf = brg = None
    while it < max_iter:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            br, brf, brg = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, brf, brg, done = [t], [f_new], [g_new], True
            break
        if gtd_new >= 0:
            br, brf, brg = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            break
        t_next, _ = polyinterp(np.array([[t_prev, f_prev, gtd_prev], [t, f_new, gtd_new]]),
                               t + 0.01 * (t - t_prev), t * 10)
        t_prev, f_prev, g_prev, gtd_prev, t = t, f_new, g_new, gtd_new, t_next
        f_new, g_new, gtd_new = at(t)
        evals, it = evals + 1, it + 1
    if it == max_iter:
        br, brf, brg = [0.0, t], [f, f_new], [g, g_new]
    insufficient = False
    while not done and it < max_iter:
        lo = 0 if brf[0] <= brf[1] else 1
        hi = 1 - lo
        t, _ = polyinterp(np.array([[br[0], brf[0], brg[0] @ d], [br[1], brf[1], brg[1] @ d]]))
        bmin, bmax = min(br), max(br)
        if min(bmax - t, t - bmin) / (bmax - bmin) < 0.1:
            if insufficient or t >= bmax or t <= bmin:
                t = bmax - 0.1 * (bmax - bmin) if abs(t - bmax) < abs(t - bmin) else bmin + 0.1 * (bmax - bmin)
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new, gtd_new = at(t)
        evals, it = evals + 1, it + 1
        if f_new > f + c1 * t * gtd or f_new >= brf[lo]:
            br[hi], brf[hi], brg[hi] = t, f_new, g_new
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[hi] - br[lo]) >= 0:
                br[hi], brf[hi], brg[hi] = br[lo], brf[lo], brg[lo]
            br[lo], brf[lo], brg[lo] = t, f_new, g_new
        if not done and abs((br[0] - br[1]) * gtd_new) < tol_x:
            break
    best = 0 if len(brf) == 1 or brf[0] <= brf[1] else 1
    return brf[best], brg[best], x0 + br[best] * d, br[best], evals


def lbfgs_ls(fn: Objective, x: np.ndarray, max_iter: int, n_corr: int = 100, tol_fun: float = 1e-5,
             tol_x: float = 1e-9):
    """torch7's lbfgs with lineSearch = lswolfe and learningRate 1 (one call)."""
    max_eval = max_iter * 1.25
    f, g = fn(x)
    hist, evals, s_list, y_list, hdiag, d, t, g_old = [f], 1, [], [], 1.0, None, None, None
    for it in range(1, max_iter + 1):
        d, hdiag = lbfgs_direction(g, g_old, d, t, it == 1, s_list, y_list, hdiag, n_corr)
        g_old, f_old = g.copy(), f
        gtd = g @ d
        if gtd > -tol_x:
            break
        t = min(1.0, 1.0 / np.abs(g).sum()) if it == 1 else 1.0
        f, g, x, t, n = lswolfe(fn, x, t, d, f, g, gtd)
        hist.append(f)
        evals += n
        if it == max_iter or evals >= max_eval or np.abs(g).sum() <= tol_fun \
                or np.abs(d * t).sum() <= tol_x or abs(f - f_old) < tol_x:
            break
    return x, hist, evals


def cg(fn: Objective, x: np.ndarray, max_iter: int = 20, max_eval: float | None = None, rho=0.01,
       sig=0.5, interp=0.1, ext=3.0, ratio=100.0):
    """torch7's cg: Rasmussen's minimize.m, stopping at the first failed line search."""
    max_eval = max_iter * 1.25 if max_eval is None else max_eval
    f1, df1 = fn(x)
    hist, i = [f1], 1
    s = -df1
    d1 = -s @ s
    z1 = 1 / (1 - d1)
    while i < abs(max_eval):
        x0, f0, df0 = x.copy(), f1, df1.copy()
        x = x + z1 * s
        f2, df2 = fn(x)
        i += 1
        d2 = df2 @ s
        f3, d3, z3 = f1, d1, -z1
        m, success, limit = min(max_iter, max_eval - i), False, -1.0
        while True:
            while (f2 > f1 + z1 * rho * d1 or d2 > -sig * d1) and m > 0:
                limit = z1
                with np.errstate(all="ignore"):
                    if f2 > f1:
                        z2 = z3 - (0.5 * d3 * z3 * z3) / (d3 * z3 + f2 - f3)
                    else:
                        a = 6 * (f2 - f3) / z3 + 3 * (d2 + d3)
                        b = 3 * (f3 - f2) - z3 * (d3 + 2 * d2)
                        z2 = (np.sqrt(b * b - a * d2 * z3 * z3) - b) / a
                if not np.isfinite(z2):
                    z2 = z3 / 2
                z2 = max(min(z2, interp * z3), (1 - interp) * z3)
                z1 += z2
                x = x + z2 * s
                f2, df2 = fn(x)
                i, m = i + 1, m - 1
                d2 = df2 @ s
                z3 -= z2
            if f2 > f1 + z1 * rho * d1 or d2 > -sig * d1:
                break
            if d2 > sig * d1:
                success = True
                break
            if m == 0:
                break
            a = 6 * (f2 - f3) / z3 + 3 * (d2 + d3)
            b = 3 * (f3 - f2) - z3 * (d3 + 2 * d2)
            with np.errstate(all="ignore"):
                z2 = -d2 * z3 * z3 / (b + np.sqrt(b * b - a * d2 * z3 * z3))
            if not np.isfinite(z2) or z2 < 0:
                z2 = z1 * (ext - 1) if limit < -0.5 else (limit - z1) / 2
            elif limit > -0.5 and z2 + z1 > limit:
                z2 = (limit - z1) / 2
            elif limit < -0.5 and z2 + z1 > z1 * ext:
                z2 = z1 * (ext - 1)
            elif z2 < -z3 * interp:
                z2 = -z3 * interp
            elif limit > -0.5 and z2 < (limit - z1) * (1 - interp):
                z2 = (limit - z1) * (1 - interp)
            f3, d3, z3 = f2, d2, -z2
            z1 += z2
            x = x + z2 * s
            f2, df2 = fn(x)
            i, m = i + 1, m - 1
            d2 = df2 @ s
        if not success:
            return x0, hist, i
        f1 = f2
        hist.append(f1)
        s = (df2 @ df2 - df2 @ df1) / (df1 @ df1) * s - df2
        df1, df2 = df2, df1
        d2 = df1 @ s
        if d2 > 0:
            s = -df1
            d2 = -s @ s
        z1 *= min(ratio, d1 / (d2 - 1e-320))
        d1 = d2
    return x, hist, i


# ---- polyinterp ----

def test_polyinterp_three_points(lua, rng):
    interp = lua_fn("function(p, lo, hi) require 'optim'; return optim.polyinterp(p, lo, hi) end")
    for _ in range(10):
        x = np.array([-1.0, 0.0, 1.0]) + rng.uniform(-0.2, 0.2, 3)   # apart: a well-posed quintic
        pts = np.column_stack([x, rng.normal(size=3), rng.normal(size=3)])
        lo, hi = x[0] - rng.uniform(0, 0.5), x[2] + rng.uniform(0, 0.5)
        pos, value = interp(T(pts), lo, hi)
        ref_pos, ref_value = polyinterp(pts, lo, hi)
        assert pos == pytest.approx(ref_pos, rel=1e-7, abs=1e-9)
        assert value == pytest.approx(ref_value, rel=1e-7, abs=1e-9)
    # bounds default to the points' range
    pts = np.array([[0.0, 1.0, -1.0], [1.0, 0.5, 0.2], [2.0, 0.9, 1.0]])
    np.testing.assert_allclose(interp(T(pts)), polyinterp(pts), rtol=1e-9)


# ---- lbfgs with lswolfe: the same evaluations as torch7 ----

@pytest.mark.parametrize("x0, config, max_iter, n_corr", [
    ([0.0, 0.0], "{maxIter=100, lineSearch=optim.lswolfe}", 100, 100),   # optim's test_lbfgs_w_ls
    ([-1.2, 1.0, -0.5, 0.8, 0.3], "{maxIter=60, nCorrection=4, lineSearch=optim.lswolfe}", 60, 4),
])
def test_lbfgs_lswolfe_evaluations_as_torch7(lua, x0, config, max_iter, n_corr):
    x0 = np.array(x0)
    x, hist, evals, n_points, points, values, cfg = _RUN("lbfgs", config, T(x0))
    counted = Counted(rosenbrock)
    ref_x, ref_hist, ref_evals = lbfgs_ls(counted, x0.copy(), max_iter, n_corr)
    # rounding differs (BLAS dots): values near the minimum agree to ~1e-8 after 50 iterations
    assert evals == ref_evals == n_points == len(counted.points) == cfg["funcEval"]
    np.testing.assert_allclose(N(points), np.array(counted.points), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(N(hist), ref_hist, rtol=1e-6, atol=1e-14)
    np.testing.assert_allclose(N(x), ref_x, rtol=1e-7)
    np.testing.assert_allclose(N(x), np.ones_like(x0), atol=1e-4)      # the minimum


def test_lswolfe_zoom_against_reference(lua, rng):
    # a long first step on Rosenbrock brackets and zooms: every trial step as the reference's
    x0, t0 = np.array([-1.2, 1.0]), 5.0
    f0, g0 = rosenbrock(x0)
    d = -g0 / np.abs(g0).sum()
    out = lua_fn("""function(x0, t0, d)
      require 'optim'
      local pts = {}
      local function feval(x)
        local a, b = x[1], x[2]
        pts[#pts + 1] = x:clone()
        return 100 * (b - a * a)^2 + (1 - a)^2, torch.Tensor{-400 * a * (b - a * a) - 2 * (1 - a), 200 * (b - a * a)}
      end
      local x = x0:clone()
      local f, g = feval(x)
      table.remove(pts)
      local f1, g1, x1, t, n = optim.lswolfe(feval, x, t0, d, f, g, g:dot(d))
      return f1, g1, x1, t, n, torch.cat(pts, 1):view(#pts, -1)
    end""")(x0, t0, d)
    counted = Counted(rosenbrock)
    ref = lswolfe(counted, x0, t0, d, f0, g0, g0 @ d)
    assert out[4] == ref[4] == len(counted.points) and ref[4] > 2
    assert out[3] == pytest.approx(ref[3], rel=1e-10) and out[0] == pytest.approx(ref[0], rel=1e-10)
    np.testing.assert_allclose(N(out[5]), np.array(counted.points), rtol=1e-10)
    np.testing.assert_allclose(N(out[2]), ref[2], rtol=1e-10)


def test_lbfgs_state_fields(lua):
    _, _, _, _, _, _, cfg = _RUN("lbfgs", "{maxIter=8, nCorrection=3, lineSearch=optim.lswolfe}",
                                 T(np.array([-1.2, 1.0])))
    assert cfg["nIter"] == 8 and len(cfg["old_dirs"]) == len(cfg["old_stps"]) == 3
    assert cfg["dir_bufs"] is not None and cfg["stp_bufs"] is not None
    for name in ("d", "g_old", "tmp1"):
        assert N(cfg[name]).shape == (2,)
    assert cfg["Hdiag"] > 0 and cfg["t"] > 0 and cfg["f_old"] is not None


def test_lbfgs_optimal_start_returns_no_count(lua):
    out = _RUN("lbfgs", "{}", T(np.ones(3)))
    assert out[2] is None and N(out[1]).tolist() == [0.0] and out[3] == 1


# ---- cg ----

@pytest.mark.parametrize("x0, config, kwargs", [
    ([0.0, 0.0], "{maxIter=50}", dict(max_iter=50)),                        # optim's test_cg
    ([-1.2, 1.0, 0.5], "{maxEval=40, maxIter=30, ratio=50}", dict(max_iter=30, max_eval=40, ratio=50)),
    ([0.5, 0.5], "{maxEval=-40, rho=0.05, sig=0.3, int=0.2, ext=2}",
     dict(max_eval=-40, rho=0.05, sig=0.3, interp=0.2, ext=2.0)),
])
def test_cg_as_minimize(lua, x0, config, kwargs):
    x0 = np.array(x0)
    x, hist, evals, n_points, points, _, cfg = _RUN("cg", config, T(x0))
    counted = Counted(rosenbrock)
    ref_x, ref_hist, ref_evals = cg(counted, x0.copy(), **kwargs)
    # rounding differs from the first ulp on (operation order); longer runs diverge chaotically
    assert evals == ref_evals == n_points == len(counted.points)
    np.testing.assert_allclose(N(points), np.array(counted.points), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(N(hist), ref_hist, rtol=1e-6, atol=1e-14)
    np.testing.assert_allclose(N(x), ref_x, rtol=1e-7)
    for name in ("df0", "df1", "df2", "df3", "x0", "s"):
        assert N(cfg[name]).shape == x0.shape


def test_cg_rosenbrock_minimum(lua):
    # optim's test_cg: from (0, 0) the run ends at the minimum (1, 1)
    x, hist, evals, *_ = _RUN("cg", "{maxIter=50}", T(np.zeros(2)))
    np.testing.assert_allclose(N(x), [1.0, 1.0], atol=1e-4)
    assert N(hist)[0] == 1.0 and N(hist)[-1] < 1e-8 and evals <= 50 * 1.25 + 2


def test_cg_quadratic_minimum(lua, rng):
    # on 0.5 x'Ax - b'x conjugate gradients reach A^-1 b
    m = rng.standard_normal((6, 6))
    a, b = m @ m.T + 6 * np.eye(6), rng.standard_normal(6)
    x = lua_fn("""function(A, b)
      require 'optim'
      local function feval(p) return 0.5 * p:dot(torch.mv(A, p)) - b:dot(p), torch.mv(A, p) - b end
      return (optim.cg(feval, torch.zeros(6), {maxEval=100}))
    end""")(a, b)
    np.testing.assert_allclose(N(x), np.linalg.solve(a, b), rtol=1e-6, atol=1e-8)


def test_cg_failed_search_restores_x(lua):
    # a linear function never meets the curvature condition: the search extrapolates until its
    # maxIter evaluations are spent, fails, and the run ends back at the start
    x, hist, evals = lua_fn("""function()
      require 'optim'
      local function feval(p) return -p:sum(), torch.Tensor(2):fill(-1) end
      return optim.cg(feval, torch.Tensor{1, 2}, {maxIter=5, maxEval=100})
    end""")()
    np.testing.assert_array_equal(N(x), [1.0, 2.0])
    assert len(hist) == 1 and evals == 2 + 5


def test_lbfgs_errors_are_clear(lua):
    with pytest.raises(luabridge.LuaError, match="polyinterp"):
        lua_fn("function() require 'optim'; return optim.polyinterp(torch.zeros(1, 3)) end")()


def test_lswolfe_float_keeps_bracket_in_single_precision(lua):
    # torch7 holds the bracket in tensors of x's type: with a FloatTensor the step and value it
    # returns are single-precision numbers
    f, t, evals, x = lua_fn("""function()
      require 'optim'
      local function feval(p)
        local a, b = p[1], p[2]
        return 100 * (b - a * a)^2 + (1 - a)^2,
               torch.FloatTensor{-400 * a * (b - a * a) - 2 * (1 - a), 200 * (b - a * a)}
      end
      local x = torch.FloatTensor{-1.2, 1}
      local f0, g0 = feval(x)
      local d = -g0 / g0:norm(1)
      local f, g, x1, t, n = optim.lswolfe(feval, x, 3, d, f0, g0, g0:dot(d))
      return f, t, n, x1
    end""")()
    assert evals > 1 and np.float32(f) == f and np.float32(t) == t and f < 24.2
    assert N(x).dtype == np.float32


def test_lbfgs_verbose_lines(lua, capfd):
    _RUN("lbfgs", "{maxIter=3, verbose=true}", T(np.array([-1.2, 1.0])))
    assert capfd.readouterr().out.splitlines() == ["<optim.lbfgs> \tcreating recyclable direction/step/history buffers",
                                                   "<optim.lbfgs> \treached max number of iterations"]
