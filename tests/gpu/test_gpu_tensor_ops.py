"""CUDA tensors through every tensor op family (fills and copies, elementwise math, comparisons,
reductions, scans, products, indexing, sorting, joins and views, random fills, conversions):
each result against the same op on CPU DoubleTensors and an independent numpy float64
reference. Run with CuPy on a device, or numpy standing in (see conftest.py)."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from helpers import lua_fn as L
from gpu_mode import XP

A = np.array([[0.5, 1.25, 2.0, 0.75], [1.5, 0.6, 1.1, 1.9], [0.9, 1.7, 0.55, 1.3]])   # positive
B = np.array([[-1.0, 0.5, 2.5, -0.25], [0.0, -1.5, 1.0, 3.0], [2.0, -0.75, -2.0, 0.4]])
S = np.array([[-1.0, 2.0], [0.5, 1.5], [3.0, -2.0], [1.0, 0.25]])                      # 4 x 2

# (label, a Lua expression over A, B, S on one device, the numpy float64 reference)
CASES = [
    ("fill", "A:clone():fill(2.5)", lambda: np.full((3, 4), 2.5)),
    ("zero", "A:clone():zero()", lambda: np.zeros((3, 4))),
    ("copy", "A.new(3, 4):copy(B)", lambda: B),
    ("exp", "torch.exp(B)", lambda: np.exp(B)),
    ("log", "torch.log(A)", lambda: np.log(A)),
    ("sqrt", "torch.sqrt(A)", lambda: np.sqrt(A)),
    ("tanh", "torch.tanh(B)", lambda: np.tanh(B)),
    ("sigmoid", "torch.sigmoid(B)", lambda: 1 / (1 + np.exp(-B))),
    ("abs", "torch.abs(B)", lambda: np.abs(B)),
    ("floor", "torch.floor(B)", lambda: np.floor(B)),
    ("sign", "torch.sign(B)", lambda: np.sign(B)),
    ("pow", "torch.pow(A, 1.5)", lambda: A ** 1.5),
    ("cpow", "torch.cpow(A, B)", lambda: A ** B),
    ("add", "torch.add(A, 2, B)", lambda: A + 2 * B),
    ("mul", "torch.mul(B, -3)", lambda: -3 * B),
    ("cmul", "torch.cmul(A, B)", lambda: A * B),
    ("cdiv", "torch.cdiv(B, A)", lambda: B / A),
    ("fmod", "torch.fmod(B, 0.7)", lambda: np.fmod(B, 0.7)),
    ("remainder", "torch.remainder(B, 0.7)", lambda: B - 0.7 * np.floor(B / 0.7)),
    ("clamp", "torch.clamp(B, -1, 1)", lambda: np.clip(B, -1, 1)),
    ("cmax", "torch.cmax(A, B)", lambda: np.maximum(A, B)),
    ("atan2", "torch.atan2(B, A)", lambda: np.arctan2(B, A)),
    ("lerp", "torch.lerp(A, B, 0.25)", lambda: A + 0.25 * (B - A)),
    ("addcmul", "torch.addcmul(A, 0.5, B, B)", lambda: A + 0.5 * B * B),
    ("addcdiv", "torch.addcdiv(B, 2, B, A)", lambda: B + 2 * B / A),
    ("lt", "torch.lt(B, A)", lambda: (B < A).astype(float)),
    ("ge scalar", "torch.ge(B, 0.5)", lambda: (B >= 0.5).astype(float)),
    ("eq", "torch.eq(B, B:clone())", lambda: np.ones((3, 4))),
    ("sum dim", "torch.sum(B, 2)", lambda: B.sum(1, keepdims=True)),
    ("mean dim", "torch.mean(B, 1)", lambda: B.mean(0, keepdims=True)),
    ("prod dim", "torch.prod(A, 2)", lambda: A.prod(1, keepdims=True)),
    ("var dim", "torch.var(B, 2)", lambda: B.var(1, ddof=1, keepdims=True)),
    ("std dim biased", "torch.std(B, 1, true)", lambda: B.std(0, keepdims=True)),
    ("norm dim", "torch.norm(B, 3, 2)", lambda: (np.abs(B) ** 3).sum(1, keepdims=True) ** (1 / 3)),
    ("max dim", "select(1, torch.max(B, 2))", lambda: B.max(1, keepdims=True)),
    ("argmin dim", "select(2, torch.min(B, 1))", lambda: B.argmin(0)[None] + 1.0),
    ("cumsum", "torch.cumsum(B, 2)", lambda: B.cumsum(1)),
    ("cumprod", "torch.cumprod(A, 1)", lambda: A.cumprod(0)),
    ("renorm", "torch.renorm(B, 2, 1, 1)",   # torch7 scales rows over maxnorm by maxnorm / (norm + 1e-7)
     lambda: B * np.minimum(1, 1 / (np.linalg.norm(B, axis=1, keepdims=True) + 1e-7))),
    ("mm", "torch.mm(B, S)", lambda: B @ S),
    ("mv", "torch.mv(B, S:select(2, 1))", lambda: B @ S[:, 0]),
    ("addmm", "torch.addmm(0.5, torch.mm(B, S), 2, B, S)", lambda: 2.5 * (B @ S)),
    ("bmm", "torch.bmm(B:view(1, 3, 4), S:view(1, 4, 2))", lambda: (B @ S)[None]),
    ("ger", "torch.ger(A:select(1, 1), B:select(1, 2))", lambda: np.outer(A[0], B[1])),
    ("transposed mm", "torch.mm(B:t(), B)", lambda: B.T @ B),
    ("index", "B:index(2, torch.LongTensor({4, 1}))", lambda: B[:, [3, 0]]),
    ("indexAdd", "A:clone():indexAdd(1, torch.LongTensor({3, 3}), B:narrow(1, 1, 2))",
     lambda: A + np.array([[0] * 4, [0] * 4, list(B[0] + B[1])])),
    ("indexFill", "B:clone():indexFill(2, torch.LongTensor({2}), 7)", lambda: np.where(np.arange(4) == 1, 7, B)),
    ("gather", "B:gather(2, torch.LongTensor({{4}, {1}, {2}}))", lambda: B[[0, 1, 2], [3, 0, 1]][:, None]),
    ("scatter", "A.new(3, 4):zero():scatter(2, torch.LongTensor({{2}, {3}, {1}}), 5)",
     lambda: np.eye(4)[[1, 2, 0]][:3] * 5),
    ("maskedFill", "B:clone():maskedFill(torch.gt(B, 0), -9)", lambda: np.where(B > 0, -9, B)),
    ("maskedSelect", "B:maskedSelect(torch.lt(B, 0))", lambda: B[B < 0]),
    ("nonzero", "torch.nonzero(torch.gt(B, 1)):typeAs(B)", lambda: np.argwhere(B > 1) + 1.0),
    ("sort", "select(1, torch.sort(B, 2, true))", lambda: -np.sort(-B, 1)),
    ("sort indices", "select(2, torch.sort(B, 1))", lambda: np.argsort(B, 0, kind="stable") + 1.0),
    ("topk", "select(1, torch.topk(B, 2, 2, true, true))", lambda: -np.sort(-B, 1)[:, :2]),
    ("kthvalue", "select(1, torch.kthvalue(B, 2, 2))", lambda: np.sort(B, 1)[:, 1:2]),
    ("cat", "torch.cat(A, B, 1)", lambda: np.concatenate([A, B])),
    ("transpose contiguous", "B:t():contiguous()", lambda: B.T),
    ("narrow", "B:narrow(2, 2, 2):clone()", lambda: B[:, 1:3]),
    ("unfold", "B:select(1, 1):unfold(1, 2, 2):clone()", lambda: B[0].reshape(2, 2)),
    ("expand", "A:narrow(1, 1, 1):expand(3, 4):clone()", lambda: np.repeat(A[:1], 3, 0)),
    ("repeatTensor", "B:repeatTensor(2, 1, 3)", lambda: np.tile(B, (2, 1, 3))),
    ("reshape", "B:t():reshape(2, 6)", lambda: B.T.reshape(2, 6)),
]
SCALARS = [
    ("sum", "B:sum()", lambda: B.sum()),
    ("mean", "A:mean()", lambda: A.mean()),
    ("max", "B:max()", lambda: B.max()),
    ("norm", "B:norm(1.5)", lambda: (np.abs(B) ** 1.5).sum() ** (1 / 1.5)),
    ("dot", "A:dot(B)", lambda: (A * B).sum()),
    ("dist", "A:dist(B)", lambda: np.linalg.norm(A - B)),
    ("trace", "A:narrow(2, 1, 3):trace()", lambda: np.trace(A[:, :3])),
    ("element read", "B[2][3]", lambda: B[1, 2]),
]

_RUN = """function(a, b, s, kind, expr)
  local A, B, S = a:type(kind), b:type(kind), s:type(kind)
  local r = assert(loadstring('local A, B, S = ...; return ' .. expr))(A, B, S)
  if torch.isTensor(r) then return r:double(), torch.type(r) end
  return r, type(r)
end"""


def _run(kind: str, expr: str):
    return L(_RUN)(luabridge.from_numpy(A), luabridge.from_numpy(B), luabridge.from_numpy(S), kind, expr)


def _check(expr, want, kind, tol):
    got, gtype = _run(kind, expr)
    cpu, ctype = _run("torch.DoubleTensor", expr)
    if ctype == "number":
        assert got == pytest.approx(want(), rel=tol, abs=tol) and got == pytest.approx(cpu, rel=tol, abs=tol)
        return
    assert gtype.startswith("torch.Cuda"), gtype
    got, cpu = luabridge.to_numpy(got), luabridge.to_numpy(cpu)
    np.testing.assert_allclose(got, want(), rtol=tol, atol=tol)
    np.testing.assert_allclose(got, cpu, rtol=tol, atol=tol)


@pytest.mark.parametrize("label,expr,want", CASES + SCALARS, ids=[c[0] for c in CASES + SCALARS])
def test_cuda_double_op(label, expr, want):
    _check(expr, want, "torch.CudaDoubleTensor", 1e-12)


@pytest.mark.parametrize("label,expr,want", CASES + SCALARS, ids=[c[0] for c in CASES + SCALARS])
def test_cuda_float_op(label, expr, want):
    _check(expr, want, "torch.CudaTensor", 2e-5)


def test_random_fills_follow_their_laws():
    """uniform, normal and bernoulli on the device: moments of 200 000 draws (the array
    module's generator, seeded by torch.cudaManualSeed, so seeding repeats a draw)."""
    r = L("""function()
      torch.cudaManualSeed(7)
      local u = torch.CudaTensor(200000):uniform(-1, 3)
      local n = torch.CudaTensor(200000):normal(2, 0.5)
      local b = torch.CudaTensor(200000):bernoulli(0.3)
      local first = u[1]
      torch.cudaManualSeed(7)
      return u:mean(), u:min(), u:max(), n:mean(), n:std(), b:mean(), first == torch.CudaTensor(1):uniform(-1, 3)[1]
    end""")()
    umean, umin, umax, nmean, nstd, bmean, repeats = r
    assert umean == pytest.approx(1, abs=0.02) and -1 <= umin and umax <= 3
    assert nmean == pytest.approx(2, abs=0.01) and nstd == pytest.approx(0.5, abs=0.01)
    assert bmean == pytest.approx(0.3, abs=0.01) and repeats


def test_integer_and_byte_types_and_conversions():
    r = L("""function(b)
      local g = b:cuda()
      local l = torch.CudaLongTensor({5, -3, 8})
      local byte = g:gt(0)
      return torch.type(byte), byte:sum(), (l * 3):long(), l:sum(), g:cudaDouble():double(), torch.type(g:long())
    end""")(luabridge.from_numpy(B))
    assert r[0] == "torch.CudaByteTensor" and r[1] == (B > 0).sum()
    np.testing.assert_array_equal(luabridge.to_numpy(r[2]), [15, -9, 24])
    assert r[3] == 10 and r[5] == "torch.LongTensor"
    np.testing.assert_allclose(luabridge.to_numpy(r[4]), B.astype(np.float32), rtol=0)


def test_printing_and_device_arrays():
    t, text = L("function(b) local g = b:cuda(); return g, tostring(g) end")(luabridge.from_numpy(B))
    assert "[torch.CudaTensor of size 3x4]" in text
    d = luabridge.to_numpy(t)
    assert isinstance(d, XP.ndarray) and d.dtype == np.float32
    np.testing.assert_allclose(np.asarray(luabridge.wrap(t)), B.astype(np.float32))   # a host copy
