"""nn table layers: forward and backward against numpy float64 references, gradients of the
arithmetic ones by central differences, batch detection through nInputDims, bad inputs."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import luabridge
from helpers import lua_value as lua, numpy_of
from nn_layers_check import call, module, numeric_grad

_FORWARD = "function(m, x) return m:forward(x) end"
_BACKWARD = "function(m, x, g) return m:backward(x, g) end"
def forward(m: Any, x: Any) -> Any:
    return numpy_of(call(_FORWARD, m, x))


def backward(m: Any, x: Any, g: Any) -> Any:
    return numpy_of(call(_BACKWARD, m, x, g))


def check_fd(m: Any, xs: list, rng: np.random.Generator, skip: tuple = ()) -> Any:
    """The gradInput of m at the table xs (float64 arrays, nesting allowed) against central
    differences of sum(forward * g) for a random g. Returns the analytic gradInput."""
    lx = lua(xs)
    g = rng.standard_normal(np.shape(forward(m, lx)))
    grads = backward(m, lx, lua(g))

    def walk(x, gx, path):
        if isinstance(x, list):
            for i, (xi, gi) in enumerate(zip(x, gx)):
                walk(xi, gi, path + (i,))
        elif path not in skip:
            fd = numeric_grad(lambda: float((forward(m, lx) * g).sum()), x)
            np.testing.assert_allclose(gx, fd, rtol=1e-5, atol=1e-7, err_msg=str(path))

    walk(xs, grads, ())
    return grads


# ----------------------------------------------------------------------------------------------
# splitting, joining, selecting

@pytest.mark.parametrize("dim, n_input_dims, axis", [
    (1, None, 0), (2, None, 1), (-1, None, 2), (1, 2, 1), (2, 2, 2), (1, 3, 0)])
def test_split_table(rng, dim, n_input_dims, axis):
    x = rng.standard_normal((2, 3, 4))
    code = f"nn.SplitTable({dim}{'' if n_input_dims is None else ', ' + str(n_input_dims)})"
    m = module(code)
    out = forward(m, lua(x))
    assert len(out) == x.shape[axis]
    for i, o in enumerate(out):
        np.testing.assert_array_equal(o, np.take(x, i, axis))
    g = [rng.standard_normal(o.shape) for o in out]
    np.testing.assert_array_equal(backward(m, lua(x), lua(g)), np.stack(g, axis))


def test_split_table_views_and_errors(rng):
    x = rng.standard_normal((3, 4))[:, ::2]     # non-contiguous
    m = module("nn.SplitTable(2)")
    out = call(_FORWARD, m, lua(x))
    call("function(t) t[1]:fill(7) end", out)   # slices are views of the input
    assert (x[:, 0] == 7).all()
    with pytest.raises(luabridge.LuaError, match=r"nn.SplitTable: dimension 3 out of range for a 2D input"):
        forward(module("nn.SplitTable(3)"), lua(x))
    with pytest.raises(luabridge.LuaError, match=r"gradOutput must hold at least 2 tensors, got 1"):
        backward(m, lua(x), lua([np.zeros(3)]))
    with pytest.raises(luabridge.LuaError, match=r"gradOutput must be a tensor of size 3, got 4"):
        backward(m, lua(x), lua([np.zeros(3), np.zeros(4)]))


@pytest.mark.parametrize("dim, n_input_dims, axis, batch", [
    (1, None, 0, False), (2, None, 1, False), (-1, None, 1, False), (1, 1, 1, True), (1, 2, 0, False)])
def test_join_table(rng, dim, n_input_dims, axis, batch):
    sizes = [2, 1, 3]
    if batch:
        xs = [rng.standard_normal((4, k)) for k in sizes]
    elif axis == 0:
        xs = [rng.standard_normal((k, 4)) for k in sizes]
    else:
        xs = [rng.standard_normal((4, k)) for k in sizes]
    code = f"nn.JoinTable({dim}{'' if n_input_dims is None else ', ' + str(n_input_dims)})"
    m = module(code)
    want = np.concatenate(xs, axis)
    np.testing.assert_array_equal(forward(m, lua(xs)), want)
    g = rng.standard_normal(want.shape)
    parts = backward(m, lua(xs), lua(g))
    for got, ref in zip(parts, np.split(g, np.cumsum([x.shape[axis] for x in xs])[:-1], axis)):
        np.testing.assert_array_equal(got, ref)
    # fewer inputs next time: the extra gradInput entries go
    assert len(backward(m, lua(xs[:2]), lua(np.concatenate(xs[:2], axis)))) == 2


def test_join_table_errors(rng):
    m = module("nn.JoinTable(1)")
    with pytest.raises(luabridge.LuaError, match=r"input\[2\] of size 3x5 cannot be joined to input\[1\] of size 2x4 along dim 1"):
        forward(m, lua([np.zeros((2, 4)), np.zeros((3, 5))]))
    with pytest.raises(luabridge.LuaError, match=r"nn.JoinTable: input must be a table of tensors, got torch.DoubleTensor"):
        forward(m, lua(np.zeros(3)))
    with pytest.raises(luabridge.LuaError, match=r"gradOutput must be a tensor of size 5x4, got 4x4"):
        backward(m, lua([np.zeros((2, 4)), np.zeros((3, 4))]), lua(np.zeros((4, 4))))


@pytest.mark.parametrize("index, pos", [(1, 0), (3, 2), (-1, 2), (-2, 1)])
def test_select_table(rng, index, pos):
    xs = [rng.standard_normal(2), [rng.standard_normal(3), rng.standard_normal((2, 2))], rng.standard_normal(4)]
    m = module(f"nn.SelectTable({index})")
    out = forward(m, lua(xs))
    if isinstance(xs[pos], list):
        for a, b in zip(out, xs[pos]):
            np.testing.assert_array_equal(a, b)
        g = [rng.standard_normal(3), rng.standard_normal((2, 2))]
    else:
        np.testing.assert_array_equal(out, xs[pos])
        g = rng.standard_normal(xs[pos].shape)
    grads = backward(m, lua(xs), lua(g))
    for i, (gi, xi) in enumerate(zip(grads, xs)):
        if i == pos:
            if isinstance(g, list):
                for a, b in zip(gi, g):
                    np.testing.assert_array_equal(a, b)
            else:
                np.testing.assert_array_equal(gi, g)
        elif isinstance(xi, list):
            assert all(not a.any() and a.shape == b.shape for a, b in zip(gi, xi))
        else:
            assert not gi.any() and gi.shape == xi.shape
    assert str(m) == f"nn.SelectTable({index})"


def test_select_table_missing_index():
    with pytest.raises(luabridge.LuaError, match=r"nn.SelectTable: index 4 does not exist in an input table of 2 entries"):
        forward(module("nn.SelectTable(4)"), lua([np.zeros(1), np.zeros(1)]))


def test_narrow_table(rng):
    xs = [rng.standard_normal(k + 1) for k in range(5)]
    m = module("nn.NarrowTable(2, 3)")
    out = forward(m, lua(xs))
    assert len(out) == 3
    for a, b in zip(out, xs[1:4]):
        np.testing.assert_array_equal(a, b)
    g = [rng.standard_normal(x.shape) for x in xs[1:4]]
    grads = backward(m, lua(xs), lua(g))
    assert len(grads) == 5
    for i, gi in enumerate(grads):
        if 1 <= i <= 3:
            np.testing.assert_array_equal(gi, g[i - 1])
        else:
            assert gi.shape == xs[i].shape and not gi.any()
    assert len(forward(module("nn.NarrowTable(4)"), lua(xs))) == 1
    with pytest.raises(luabridge.LuaError, match=r"entries 4 to 6 out of range of an input table of 5 entries"):
        forward(module("nn.NarrowTable(4, 3)"), lua(xs))


def test_flatten_table(rng):
    a, b, c, d = (rng.standard_normal(k + 1) for k in range(4))
    xs = [a, [b, [c]], d]
    m = module("nn.FlattenTable()")
    lx = lua(xs)
    out = call(_FORWARD, m, lx)
    assert len(out) == 4
    for i, ref in enumerate([a, b, c, d]):
        np.testing.assert_array_equal(numpy_of(out[i + 1]), ref)
    same = "function(m, x, out) return rawequal(m:forward(x), out) end"
    assert call(same, m, lx, out)                  # unchanged input: the same table
    g = [rng.standard_normal(x.shape) for x in (a, b, c, d)]
    grads = backward(m, lx, lua(g))
    np.testing.assert_array_equal(grads[0], g[0])
    np.testing.assert_array_equal(grads[1][0], g[1])
    np.testing.assert_array_equal(grads[1][1][0], g[2])
    np.testing.assert_array_equal(grads[2], g[3])
    # a new nesting is flattened again
    assert len(forward(m, lua([a, b]))) == 2
    with pytest.raises(luabridge.LuaError, match=r"nn.FlattenTable: input must be a table"):
        forward(m, lua(a))


def test_zip_table(rng):
    a1, a2, b1, b2 = (rng.standard_normal(2) for _ in range(4))
    m = module("nn.ZipTable()")
    out = forward(m, lua([[a1, a2], [b1, b2]]))
    for got, ref in zip([x for pair in out for x in pair], [a1, b1, a2, b2]):
        np.testing.assert_array_equal(got, ref)
    grads = backward(m, lua([[a1, a2], [b1, b2]]), lua([[b2, b1], [a2, a1]]))
    for got, ref in zip([x for pair in grads for x in pair], [b2, a2, b1, a1]):
        np.testing.assert_array_equal(got, ref)
    with pytest.raises(luabridge.LuaError, match=r"input\[2\] must be a table, got torch.DoubleTensor"):
        forward(m, lua([[a1], a2]))


# ----------------------------------------------------------------------------------------------
# elementwise arithmetic over tables

def test_cadd_table(rng):
    xs = [rng.standard_normal((3, 4)) for _ in range(3)]
    m = module("nn.CAddTable()")
    np.testing.assert_allclose(forward(m, lua(xs)), sum(xs), rtol=1e-12)
    g = rng.standard_normal((3, 4))
    for gi in backward(m, lua(xs), lua(g)):
        np.testing.assert_array_equal(gi, g)
    # in place: the output is input[1], the gradients are gradOutput
    x0 = xs[0].copy()
    mi = module("nn.CAddTable(true)")
    forward(mi, lua(xs))
    np.testing.assert_allclose(xs[0], x0 + xs[1] + xs[2], rtol=1e-12)
    lg = lua(g)
    grads = call(_BACKWARD, mi, lua(xs), lg)
    call("function(t) t[2]:fill(5) end", grads)
    assert (g == 5).all()


def test_csub_cmul_cdiv_tables(rng):
    a, b, c = rng.standard_normal((3, 2, 3))
    b = np.where(np.abs(b) < 0.3, 0.5, b)
    np.testing.assert_allclose(forward(module("nn.CSubTable()"), lua([a, b])), a - b, rtol=1e-12)
    np.testing.assert_allclose(forward(module("nn.CMulTable()"), lua([a, b, c])), a * b * c, rtol=1e-12)
    np.testing.assert_allclose(forward(module("nn.CDivTable()"), lua([a, b])), a / b, rtol=1e-12)
    for code, n in [("nn.CSubTable()", 2), ("nn.CMulTable()", 3), ("nn.CDivTable()", 2)]:
        check_fd(module(code), [a.copy(), b.copy(), c.copy()][:n], rng)
    # CMulTable's gradient is exact with zeros in the inputs
    z = a.copy()
    z[0, 0] = 0
    grads = backward(module("nn.CMulTable()"), lua([z, b]), lua(np.ones((2, 3))))
    np.testing.assert_allclose(grads[0], b, rtol=1e-12)
    np.testing.assert_allclose(grads[1], z, rtol=1e-12)


@pytest.mark.parametrize("name, op", [("CMaxTable", np.maximum), ("CMinTable", np.minimum)])
def test_cmax_cmin_tables(rng, name, op):
    xs = [rng.standard_normal((3, 4)) for _ in range(3)]
    xs[1][0, 0] = xs[0][0, 0]                   # a tie goes to the first input
    m = module(f"nn.{name}()")
    np.testing.assert_array_equal(forward(m, lua(xs)), op(op(xs[0], xs[1]), xs[2]))
    g = rng.standard_normal((3, 4))
    grads = backward(m, lua(xs), lua(g))
    winner = (np.argmax if name == "CMaxTable" else np.argmin)(np.stack(xs), axis=0)
    for i, gi in enumerate(grads):
        np.testing.assert_array_equal(gi, np.where(winner == i, g, 0))
    with pytest.raises(luabridge.LuaError, match=rf"nn.{name}: inconsistent tensor sizes, input\[1\] is 3x4 and input\[2\] is 5"):
        forward(m, lua([xs[0], np.zeros(5)]))


# ----------------------------------------------------------------------------------------------
# distances and products of pairs

@pytest.mark.parametrize("p", [1, 2, 3])
def test_pairwise_distance(rng, p):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    m = module(f"nn.PairwiseDistance({p})")
    want = (np.abs(a - b) ** p).sum(1) ** (1 / p)
    np.testing.assert_allclose(forward(m, lua([a, b])), want, rtol=1e-12)
    np.testing.assert_allclose(forward(m, lua([a[0].copy(), b[0].copy()])), want[:1], rtol=1e-12)
    # torch7 adds 1e-6 to the norm in the gradient: compare at that precision
    forward(m, lua([a, b]))
    grads = backward(m, lua([a, b]), lua(np.ones(4)))
    d = a - b
    ref = np.sign(d) if p == 1 else d * np.abs(d) ** (p - 2) / want[:, None] ** (p - 1)
    np.testing.assert_allclose(grads[0], ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads[1], -ref, rtol=1e-4, atol=1e-6)
    single = lua([a[0].copy(), b[0].copy()])
    forward(m, single)
    g1 = backward(m, single, lua(np.array([2.0])))
    np.testing.assert_allclose(g1[0], 2 * ref[0], rtol=1e-4, atol=1e-6)


def test_pairwise_distance_errors():
    m = module("nn.PairwiseDistance(2)")
    with pytest.raises(luabridge.LuaError, match=r"input must be two vectors or matrices of the same size, got 2x3 and 3x2"):
        forward(m, lua([np.zeros((2, 3)), np.zeros((3, 2))]))


def test_dot_product(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    m = module("nn.DotProduct()")
    np.testing.assert_allclose(forward(m, lua([a, b])), (a * b).sum(1), rtol=1e-12)
    check_fd(m, [a, b], rng)
    got = forward(m, lua([a[1].copy(), b[1].copy()]))
    np.testing.assert_allclose(got, [(a[1] * b[1]).sum()], rtol=1e-12)
    grads = backward(m, lua([a[1].copy(), b[1].copy()]), lua(np.array([3.0])))
    assert grads[0].shape == (3,)
    np.testing.assert_allclose(grads[0], 3 * b[1], rtol=1e-12)
    # non-contiguous rows
    at, bt = a.T.copy().T, b[:, ::-1]
    np.testing.assert_allclose(forward(m, lua([at, bt])), (a * b[:, ::-1]).sum(1), rtol=1e-12)


def test_cosine_distance(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    m = module("nn.CosineDistance()")
    cos = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
    np.testing.assert_allclose(forward(m, lua([a, b])), cos, rtol=1e-10)
    check_fd(m, [a, b], rng)
    check_fd(m, [a[0].copy(), b[0].copy()], rng)
    np.testing.assert_allclose(forward(m, lua([a[::-1, 0].copy(), b[:, 1].copy()])),
                               [np.dot(a[::-1, 0], b[:, 1]) / np.linalg.norm(a[:, 0]) / np.linalg.norm(b[:, 1])],
                               rtol=1e-10)


# ----------------------------------------------------------------------------------------------
# mixture of experts

def test_mixture_table_experts_table(rng):
    gater = rng.uniform(0, 1, (4, 3))
    experts = [rng.standard_normal((4, 5)) for _ in range(3)]
    m = module("nn.MixtureTable()")
    want = sum(gater[:, i:i + 1] * experts[i] for i in range(3))
    np.testing.assert_allclose(forward(m, lua([gater, experts])), want, rtol=1e-12)
    check_fd(m, [gater, experts], rng)
    # one sample: a 1-D gater
    g1 = gater[0].copy()
    e1 = [e[0].copy() for e in experts]
    np.testing.assert_allclose(forward(module("nn.MixtureTable()"), lua([g1, e1])),
                               sum(g1[i] * e1[i] for i in range(3)), rtol=1e-12)
    check_fd(module("nn.MixtureTable()"), [g1, e1], rng)


def test_mixture_table_experts_tensor(rng):
    gater = rng.uniform(0, 1, (4, 3))
    experts = rng.standard_normal((4, 2, 3, 5))     # experts along dim 3
    m = module("nn.MixtureTable(3)")
    want = (gater[:, None, :, None] * experts).sum(2)
    np.testing.assert_allclose(forward(m, lua([gater, experts])), want, rtol=1e-12)
    check_fd(m, [gater, experts], rng)
    g1, e1 = gater[0].copy(), experts[0, 0].copy()  # 1-D gater, experts along dim 1
    m1 = module("nn.MixtureTable()")
    np.testing.assert_allclose(forward(m1, lua([g1, e1])), (g1[:, None] * e1).sum(0), rtol=1e-12)
    check_fd(m1, [g1, e1], rng)


def test_mixture_table_errors(rng):
    m = module("nn.MixtureTable()")
    with pytest.raises(luabridge.LuaError, match=r"2 experts for 3 gater outputs"):
        forward(m, lua([np.ones((4, 3)), [np.ones((4, 2)), np.ones((4, 2))]]))
    with pytest.raises(luabridge.LuaError, match=r"do not hold 3 experts along dim 2"):
        forward(module("nn.MixtureTable(2)"), lua([np.ones((4, 3)), np.ones((4, 2, 5))]))


def test_empty_pieces(rng):
    a, e = rng.standard_normal((2, 3)), np.zeros((2, 0))
    m = module("nn.JoinTable(2)")
    np.testing.assert_array_equal(forward(m, lua([a, e, a])), np.concatenate([a, e, a], 1))
    grads = backward(m, lua([a, e, a]), lua(np.ones((2, 6))))
    assert grads[1].shape == (2, 0) and grads[2].shape == (2, 3)
    assert forward(module("nn.CAddTable()"), lua([e, e])).shape == (2, 0)
    assert forward(module("nn.CMaxTable()"), lua([e, e])).shape == (2, 0)
    assert forward(module("nn.SplitTable(2)"), lua(e)) == []


def test_zip_table_one_to_many(rng):
    v, a, b = rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(4)
    m = module("nn.ZipTableOneToMany()")
    out = forward(m, lua([v, [a, b]]))
    for (p, q), ref in zip(out, [a, b]):
        np.testing.assert_array_equal(p, v)
        np.testing.assert_array_equal(q, ref)
    g = [[rng.standard_normal(3), rng.standard_normal(2)], [rng.standard_normal(3), rng.standard_normal(4)]]
    grads = backward(m, lua([v, [a, b]]), lua(g))
    np.testing.assert_allclose(grads[0], g[0][0] + g[1][0], rtol=1e-12)
    np.testing.assert_array_equal(grads[1][1], g[1][1])


def test_cadd_tensor_table(rng):
    v = rng.standard_normal(3)
    xs = [rng.standard_normal(3) for _ in range(3)]
    m = module("nn.CAddTensorTable()")
    for got, x in zip(forward(m, lua([v, xs])), xs):
        np.testing.assert_allclose(got, v + x, rtol=1e-12)
    check_fd(m, [v, xs], rng)
    with pytest.raises(luabridge.LuaError, match=r"input\[2\]\[2\] must be a tensor of size 3"):
        forward(m, lua([v, [xs[0], np.zeros(2)]]))
