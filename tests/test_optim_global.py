"""optim's FistaLS, cmaes, de and checkgrad against numpy float64 re-implementations written from
torch7's optim (cmaes fed the same normal draws and dsyev eigenvectors, de the same Mersenne
Twister stream as numpy's legacy seeding gives), and their results on known minima (lasso optimality, Rosenbrock's (1, ..., 1))."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from helpers import N, T, lua_fn
from test_optim_search import rosenbrock as rosenbrock_and_gradient


def rosenbrock(x: np.ndarray) -> float:
    return rosenbrock_and_gradient(x)[0]


_ROSENBROCK_LUA = """
  local function rosenbrock(x)
    local n = x:size(1)
    local head, tail = x:narrow(1, 1, n - 1), x:narrow(1, 2, n - 1)
    local r = tail - torch.cmul(head, head)
    return 100 * r:dot(r) + (1 - head):dot(1 - head), x.new(n):zero()
  end
"""

# ---- FistaLS ----

# the lasso min |Dx - b|^2 + lam |x|_1 through optim.FistaLS; returns x, the history as a table
# of its fields, the params afterwards and the number of f and g calls
_LASSO = lua_fn("""function(D, b, lam, params)
  require 'optim'
  local calls = {f = 0, g = 0}
  local function f(x, mode)
    calls.f = calls.f + 1
    local r = torch.mv(D, x):add(-1, b)
    if mode == 'dx' then return r:dot(r), torch.mv(D:t(), r):mul(2) end
    return r:dot(r)
  end
  local function g(x) calls.g = calls.g + 1; return lam * x:norm(1) end
  local function pl(x, L)   -- soft thresholding at lam / L
    local shrunk = torch.abs(x):add(-lam / L):clamp(0, math.huge)
    x:sign():cmul(shrunk)
  end
  local xinit = torch.Tensor(D:size(2)):fill(7)   -- FistaLS starts from zero whatever it holds
  local x, h = optim.FistaLS(f, g, pl, xinit, params)
  assert(xinit:equal(x), 'the solution is copied into xinit')
  local fields = {}
  for _, k in ipairs{'nline', 'L', 'F', 'Fply', 'Gply', 'Q'} do
    fields[k] = torch.Tensor(#h)
    for i = 1, #h do fields[k][i] = h[i][k] end
  end
  return x, fields, params, calls.f, calls.g
end""")


def fista_reference(d: np.ndarray, b: np.ndarray, lam: float, fista: bool, L=0.1, Lstep=1.5,
                    maxiter=50, maxline=20, errthres=1e-4):
    """torch7's FistaLS on the lasso; returns x, the history rows and the f, g call counts."""
    def f(x):
        r = d @ x - b
        return r @ r, 2 * d.T @ r

    def shrink(v, t):
        return np.sign(v) * np.maximum(np.abs(v) - t, 0)
    n = d.shape[1]
    xk, xkm, y = np.zeros(n), np.zeros(n), np.zeros(n)
    tk, hist, fcalls, gcalls = 1.0, [], 0, 1
    for niter in range(1, maxiter + 1):
        fy, gfy = f(y)
        fcalls += 1
        nline = 0
        while True:
            ply = shrink(y - gfy / L, lam / L)
            xk = ply.copy()
            fply = f(ply)[0]
            fcalls += 1
            step = ply - y
            Q = fy + gfy @ step + L / 2 * step @ step
            nline += 1
            if fply <= Q:
                break
            if nline > maxline:
                xk = xkm.copy()
                break
            L *= Lstep
        if fista:
            tkp = (1 + np.sqrt(1 + 4 * tk * tk)) / 2
            y = xk + (1 - tk) / tkp * (xkm - xk)
            xkm = xk.copy()
        else:
            tkp = 0.0
            y = xk.copy()
        tk = tkp
        fply, gply = f(y)[0], lam * np.abs(y).sum()
        fcalls, gcalls = fcalls + 1, gcalls + 1
        hist.append(dict(nline=nline, L=L, F=fply + gply, Fply=fply, Gply=gply, Q=Q))
        if niter > 1 and abs(hist[-1]["F"] - hist[-2]["F"]) <= errthres:
            break
    return y, hist, fcalls, gcalls


def _lasso_problem(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    d = rng.standard_normal((15, 30))
    d /= d.std(0)
    code = np.zeros(30)
    code[[3, 11, 20]] = [0.3, -0.2, 0.25]
    return d, d @ code


@pytest.mark.parametrize("fista", [True, False])
def test_fista_against_reference(lua, rng, fista):
    d, b = _lasso_problem(rng)
    params = luabridge.eval("function(f) return {doFistaUpdate = f, maxiter = 40, maxline = 10} end")(fista)
    x, fields, out_params, fcalls, gcalls = _LASSO(d, b, 0.1, params)
    ref_x, hist, ref_f, ref_g = fista_reference(d, b, 0.1, fista, maxiter=40, maxline=10)
    for key in ("nline", "L", "F", "Fply", "Gply", "Q"):
        np.testing.assert_allclose(N(fields[key]), [h[key] for h in hist], rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(N(x), ref_x, rtol=1e-9, atol=1e-12)
    assert (fcalls, gcalls) == (ref_f, ref_g)
    assert out_params["L"] == hist[-1]["L"] and out_params["xkm"] is not None and out_params["ply"] is not None


def test_fista_reaches_lasso_optimum(lua, rng):
    # optimality of min |Dx - b|^2 + lam |x|_1: the gradient 2 D'(Dx - b) is -lam sign(x) on the
    # support and at most lam in size elsewhere
    d, b = _lasso_problem(rng)
    lam = 0.1
    params = luabridge.eval("{doFistaUpdate = true, maxiter = 3000, errthres = 1e-13}")
    x = N(_LASSO(d, b, lam, params)[0])
    grad = 2 * d.T @ (d @ x - b)
    support = np.abs(x) > 1e-9
    assert support.any()
    np.testing.assert_allclose(grad[support], -lam * np.sign(x[support]), atol=1e-4)
    assert np.all(np.abs(grad[~support]) <= lam + 1e-4)


def test_fista_maxiter_error(lua):
    with pytest.raises(luabridge.LuaError, match="optim.FistaLS: params.maxiter must be at least 1, got 0"):
        _LASSO(np.eye(2), np.ones(2), 0.1, luabridge.eval("{maxiter = 0}"))


# ---- cmaes ----

_SYMEIG = lua_fn("function(C) return torch.symeig(C:clone(), 'V') end")


def dsyev(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and vectors of c by LAPACK's dsyev, the routine torch7's symeig calls (the
    vectors' signs are arbitrary; numpy's eigh, dsyevd, may choose others), checked here."""
    ev, b = (N(t) for t in _SYMEIG(c))
    np.testing.assert_allclose(b @ np.diag(ev) @ b.T, c, atol=1e-12)
    np.testing.assert_allclose(b.T @ b, np.eye(len(c)), atol=1e-12)
    return ev, b


def cmaes_reference(x0: np.ndarray, sigma: float, normals: np.ndarray, max_eval: float, popsize=None):
    """torch7's cmaes with the standard normal draws given (one row of N per candidate)."""
    n = len(x0)
    lam = popsize or 4 + int(np.floor(3 * np.log(n)))
    mu = lam / 2
    nmu = int(np.floor(mu))
    w = np.log(mu + 0.5) - np.log(np.arange(1, nmu + 1))
    w /= w.sum()
    mueff = w.sum() ** 2 / (w @ w)
    cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
    cs = (mueff + 2) / (n + mueff + 5)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    damps = 2 * mueff / lam + 0.3 + cs
    pc, ps, B, D, C, inv = np.zeros(n), np.zeros(n), np.eye(n), np.ones(n), np.eye(n), np.eye(n)
    xmean, eigeneval, count, drawn = x0.astype(float).copy(), 0, 0, 0
    hist, best_x, best_f, fit = [rosenbrock(x0)], None, None, np.zeros(lam)

    def stop():
        return count > 0 and (count >= max_eval or D.max() > 1e7 * D.min() or fit[-1] - fit[0] < 1e-12
                              or sigma * D.max() < 1e-11)
    while True:
        if count - eigeneval > lam / (c1 + cmu) / n / 10:
            eigeneval = count
            C = np.triu(C) + np.triu(C, 1).T
            ev, B = dsyev(C)
            D = np.sqrt(ev)
            inv = B @ np.diag(1 / D) @ B.T
        arx = np.array([xmean + sigma * (B @ (normals[drawn + k] * D)) for k in range(lam)])
        drawn += lam
        fit = np.array([rosenbrock(c) for c in arx])
        count += lam
        order = np.argsort(fit, kind="stable")
        fit, parents = fit[order], arx[order[:nmu]]
        hist.append(fit[0])
        if best_f is None or fit[0] < best_f:
            best_x, best_f = parents[0].copy(), fit[0]
        xold = xmean
        xmean = parents.T @ w
        y = xmean - xold
        ps = (1 - cs) * ps + np.sqrt(cs * (2 - cs) * mueff) / sigma * (inv @ y)
        hsig = 1.0 if (ps @ ps) / (1 - (1 - cs) ** (2 * count / lam)) / n < 2 + 4 / (n + 1) else 0.0
        pc = (1 - cc) * pc + np.sqrt(cc * (2 - cc) * mueff) / sigma * hsig * y
        c1a = c1 - (1 - hsig ** 2) * c1 * cc * (2 - cc)
        steps = parents - xold
        C = (1 - c1a - cmu) * C + c1 * np.outer(pc, pc) + cmu / sigma ** 2 * (steps.T * w) @ steps
        sigma *= np.exp(min(0.6, (cs / damps) * ((ps @ ps) / n - 1) / 2))
        if stop():
            break
    hist.append(best_f)
    return best_x, hist, count


_CMAES = lua_fn("""function(x0, config, seed, draws)
  require 'optim'
""" + _ROSENBROCK_LUA + """
  config = loadstring('return ' .. config)()
  torch.manualSeed(seed)
  local n = x0:nElement()
  local normals = torch.Tensor(draws, n)
  for k = 1, draws do normals[k]:copy(torch.Tensor(n):normal(0, 1)) end   -- as cmaes draws them
  torch.manualSeed(seed)
  local x, hist, evals = optim.cmaes(rosenbrock, x0:clone(), config)
  return x, torch.Tensor(hist), evals, normals, config
end""")


@pytest.mark.parametrize("n, generations, popsize", [(4, 12, None), (3, 10, None), (5, 6, 9)])
def test_cmaes_against_reference(lua, n, generations, popsize):
    x0 = np.linspace(-0.5, 0.5, n)
    lam = popsize or 4 + int(np.floor(3 * np.log(n)))
    config = f"{{sigma=0.5, maxEval={generations * lam}" + (f", popsize={popsize}" if popsize else "") + "}"
    x, hist, evals, normals, _ = _CMAES(T(x0), config, 5, generations * lam)
    ref_x, ref_hist, ref_evals = cmaes_reference(x0, 0.5, N(normals), generations * lam, popsize)
    assert evals == ref_evals == generations * lam
    np.testing.assert_allclose(N(hist), ref_hist, rtol=1e-9)
    np.testing.assert_allclose(N(x), ref_x, rtol=1e-9)


def test_cmaes_rosenbrock_10d(lua):
    # optim's test_cmaes: 10-D Rosenbrock from zero, sigma 0.5; about 6500 evaluations expected
    x, hist, evals, _, cfg = _CMAES(T(np.zeros(10)), "{maxEval=10000, sigma=0.5, verb_disp=0}", 1, 1)
    hist = N(hist)
    np.testing.assert_allclose(N(x), np.ones(10), atol=1e-5)
    assert hist[0] == 9.0 and hist[-1] < 1e-10 and hist[-1] == hist[1:-1].min()
    assert evals % 10 == 0 and 4000 <= evals <= 10000 and len(hist) == evals // 10 + 2


def test_cmaes_ftarget_and_errors(lua):
    _, hist, evals, _, _ = _CMAES(T(np.zeros(3)), "{sigma=0.3, ftarget=0.5}", 2, 1)
    assert N(hist)[-2] <= 0.5 < N(hist)[1:-2].min()
    with pytest.raises(luabridge.LuaError, match="optim.cmaes: state.sigma"):
        _CMAES(T(np.zeros(3)), "{}", 2, 1)
    with pytest.raises(luabridge.LuaError, match="torch.symeig not available for torch.IntTensor"):
        lua_fn("function() require 'optim'; optim.cmaes(function() return 0 end, torch.IntTensor(2), {sigma = 1}) end")()


# ---- de ----

class TorchRandom:
    """torch7's generator seeded with 1: MT19937 32-bit draws (numpy's legacy seeding is the same)."""

    def __init__(self) -> None:
        self.rs = np.random.RandomState(1)

    def draw(self) -> int:
        return int(self.rs.randint(0, 2 ** 32, dtype=np.uint64))

    def uniform(self, a: float, b: float) -> float:
        return self.draw() / 2 ** 32 * (b - a) + a

    def random(self, a: int, b: int) -> int:
        return self.draw() % (b - a + 1) + a


def de_reference(d: int, popsize: int, F: float, CR: float, max_fes: int, lo=-30.0, hi=30.0):
    g = TorchRandom()
    pop = np.array([[g.uniform(lo, hi) for _ in range(d)] for _ in range(popsize)])
    fit = np.array([rosenbrock(p) for p in pop])
    values = list(fit)
    best_f = fit.max()            # torch7 starts from the largest value
    best = pop[np.argmax(fit)].copy()
    while len(values) + 1 < max_fes:
        kids, kid_f = [], []
        for i in range(popsize):
            if len(values) >= max_fes:
                break
            r1 = g.random(1, popsize) - 1
            while r1 == i:
                r1 = g.random(1, popsize) - 1
            r2 = g.random(1, popsize) - 1
            while r2 == r1 or r2 == i:
                r2 = g.random(1, popsize) - 1
            jrand = g.random(1, d) - 1
            kid = pop[i].copy()
            for j in range(d):
                if g.uniform(0, 1) < CR or i == jrand:
                    kid[j] = best[j] + F * (pop[r1][j] - pop[r2][j])
            kids.append(kid)
            kid_f.append(rosenbrock(kid))
            values.append(kid_f[-1])
        for i, (kid, kf) in enumerate(zip(kids, kid_f)):
            if kf <= fit[i]:
                pop[i], fit[i] = kid, kf
                if kf < best_f:
                    best_f, best = kf, kid.copy()
    return best, np.array(values)


_DE = lua_fn("""function(x0, config)
  require 'optim'
""" + _ROSENBROCK_LUA + """
  config = loadstring('return ' .. config)()
  return optim.de(rosenbrock, x0, config)
end""")


@pytest.mark.parametrize("d, config, args", [
    (2, "{popsize=50, scaleFactor=0.5, crossoverRate=0.9, maxFEs=3000}", (50, 0.5, 0.9, 3000)),  # test_de
    (3, "{popsize=12, scaleFactor=0.7, crossoverRate=0.3, maxFEs=150, minRegion=-2, maxRegion=3}",
     (12, 0.7, 0.3, 150, -2.0, 3.0)),     # 150 is not a whole number of generations
])
def test_de_against_reference(lua, d, config, args):
    x, values = _DE(T(np.zeros(d)), config)
    ref_x, ref_values = de_reference(d, *args)
    np.testing.assert_allclose(N(values), ref_values, rtol=1e-12)
    np.testing.assert_allclose(N(x), ref_x, rtol=1e-12)


def test_de_rosenbrock_minimum(lua):
    x, values = _DE(T(np.zeros(2)), "{popsize=50, scaleFactor=0.5, crossoverRate=0.9, maxFEs=3000}")
    np.testing.assert_allclose(N(x), [1.0, 1.0], atol=1e-6)
    assert N(values).shape == (3000,) and N(values)[-50:].min() < 1e-12


def test_de_errors(lua):
    with pytest.raises(luabridge.LuaError, match="optim.de: config.maxFEs must be a number, got nil"):
        _DE(T(np.zeros(2)), "{scaleFactor=0.5, crossoverRate=0.9}")
    with pytest.raises(luabridge.LuaError, match=r"config.maxFEs \(10\) must cover the first population \(popsize 20\)"):
        _DE(T(np.zeros(2)), "{scaleFactor=0.5, crossoverRate=0.9, maxFEs=10}")


# ---- checkgrad ----

_CHECK = lua_fn("""function(A, b, x0, wrong, eps)
  require 'optim'
  local grad = torch.Tensor()
  local function feval(x)   -- 0.5 x'Ax - b'x through a reused gradient buffer, as nn code does
    grad:resizeAs(x):copy(torch.mv(A, x)):add(-1, b)
    if wrong then grad[1] = grad[1] + 1 end
    return 0.5 * x:dot(torch.mv(A, x)) - b:dot(x), grad
  end
  local x = x0:clone()
  local diff, dC, dC_est = optim.checkgrad(feval, x, eps)
  return diff, dC, dC_est, x
end""")


def test_checkgrad(lua, rng):
    m = rng.standard_normal((4, 4))
    a, b, x0 = m @ m.T + np.eye(4), rng.standard_normal(4), rng.standard_normal(4)
    diff, dc, est, x = _CHECK(a, b, x0, False, None)
    exact = a @ x0 - b
    np.testing.assert_allclose(N(dc), exact, rtol=1e-12)
    expected = [((0.5 * (x0 + e) @ a @ (x0 + e) - b @ (x0 + e)) - (0.5 * (x0 - e) @ a @ (x0 - e) - b @ (x0 - e)))
                / 2e-7 for e in np.eye(4) * 1e-7]
    np.testing.assert_allclose(N(est), expected, rtol=1e-5)
    np.testing.assert_allclose(N(est), exact, rtol=1e-5, atol=1e-6)
    assert diff < 1e-6 and np.array_equal(N(x), x0)
    diff, dc, est, _ = _CHECK(a, b, x0, True, 1e-5)
    assert diff == pytest.approx(np.linalg.norm(N(dc) - N(est)) / np.linalg.norm(N(dc) + N(est)), rel=1e-12)
    assert diff > 1e-3
