"""Hypothesis fuzzing of the tensor structure API from Python.

Good calls: chains of random views (narrow, select, transpose, t, permute, unfold, expand, sub,
view, squeeze, unsqueeze, indexing) on tensors of random shapes, zero-size dims included, must
give exactly the values and shapes numpy's equivalent views give.
Bad calls (dims and indices out of range, negative or non-finite sizes, wrong types, mismatched
view sizes) must raise luabridge.LuaError with a checked message (never a raw Lua runtime error
such as "attempt to compare"), and leave the tensor and its memory as they were.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import assume, HealthCheck, given, settings
from hypothesis import strategies as st

import luabridge
from luabridge.core.runtime import bridge

# FUZZ_EXAMPLES=5000 for a longer hunt (the default keeps this file at a few seconds)
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def lua_fns(lua):
    """call(t, name, ...) = t:name(...), get(t, k) = t[k], put(t, k, v): t[k] = v; a Lua error
    comes out as luabridge.LuaError (through the runtime's protected call)."""
    b = bridge()

    def protected(code: str) -> Callable:
        fn = lua.eval(code)
        return lambda *args: b.call(fn, *args)
    return (protected("function(t, name, ...) return t[name](t, ...) end"),
            protected("function(t, k) return t[k] end"),
            protected("function(t, k, v) t[k] = v end"))


def table(x: Any) -> Any:
    """Python lists (nested) as Lua tables; everything else as is."""
    if isinstance(x, list):
        return luabridge.runtime().table_from([table(v) for v in x])
    return x


shapes = st.lists(st.integers(0, 4), min_size=1, max_size=4)


def make_pair(shape: list[int]) -> tuple[np.ndarray, Any]:
    a = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float64).reshape(shape)
    return a, luabridge.from_numpy(a.copy())


def numpy_of(t: Any) -> np.ndarray:
    return luabridge.to_numpy(t)


def torch_contiguous(shape: tuple[int, ...], strides: list[int]) -> bool:
    """torch7's isContiguous: row-major strides, size-1 dims ignored."""
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


# ---------------------------------------------------------------------------------------------
# good calls: each op draws valid arguments for the current shape and gives (Lua args, numpy ref)

@dataclass
class Op:
    name: str
    draw: Callable[[Callable, np.ndarray, Any], tuple[list, Callable[[np.ndarray], Any]] | None]


def axis_slice(axis: int, index: Any) -> tuple:
    return (slice(None),) * axis + (index,)


def draw_narrow(draw, a, t):
    d = draw(st.integers(1, a.ndim))
    n = a.shape[d - 1]
    index = draw(st.integers(1, max(n, 1)))
    size = draw(st.integers(0, n - index + 1)) if n else 0
    return [d, index, size], lambda x: x[axis_slice(d - 1, slice(index - 1, index - 1 + size))]


def draw_select(draw, a, t):
    dims = [d for d in range(1, a.ndim + 1) if a.shape[d - 1] > 0]
    if not dims:
        return None
    d = draw(st.sampled_from(dims))
    n = a.shape[d - 1]
    i = draw(st.integers(1, n) | st.integers(-n, -1))
    return [d, i], lambda x: x[axis_slice(d - 1, i - 1 if i > 0 else i)]


def draw_transpose(draw, a, t):
    d1, d2 = draw(st.integers(1, a.ndim)), draw(st.integers(1, a.ndim))
    return [d1, d2], lambda x: np.swapaxes(x, d1 - 1, d2 - 1)


def draw_t(draw, a, t):
    return ([], lambda x: x.T) if a.ndim == 2 else None


def draw_permute(draw, a, t):
    perm = draw(st.permutations(list(range(1, a.ndim + 1))))
    as_table = draw(st.booleans())
    args = [list(perm)] if as_table else list(perm)
    return args, lambda x: np.transpose(x, [p - 1 for p in perm])


def draw_unfold(draw, a, t):
    dims = [d for d in range(1, a.ndim + 1) if a.shape[d - 1] > 0]
    if not dims:
        return None
    d = draw(st.sampled_from(dims))
    size, step = draw(st.integers(1, a.shape[d - 1])), draw(st.integers(1, 3))

    def ref(x):
        w = np.lib.stride_tricks.sliding_window_view(x, size, axis=d - 1)
        return w[axis_slice(d - 1, slice(None, None, step))]
    return [d, size, step], ref


def draw_expand(draw, a, t):
    sizes = [draw(st.integers(0, 3)) if n == 1 else n for n in a.shape]
    as_table = draw(st.booleans())
    return ([sizes] if as_table else sizes), lambda x: np.broadcast_to(x, sizes)


def draw_sub(draw, a, t):
    k = draw(st.integers(0, a.ndim))
    args, index = [], []
    for n in a.shape[:k]:
        first = draw(st.integers(1, max(n, 1)))
        last = draw(st.integers(first - 1, n))
        args += [first - n - 1 if first <= n and draw(st.booleans()) else first,
                 last - n - 1 if last >= 1 and draw(st.booleans()) else last]
        index.append(slice(first - 1, last))
    return args, lambda x: x[tuple(index)]


def draw_view(draw, a, t):
    if not torch_contiguous(a.shape, list(luabridge.wrap(t).stride())):
        return None
    total = a.size
    k = draw(st.integers(1, 4))
    sizes, rest = [], total
    for _ in range(k - 1):
        if rest == 0:
            sizes.append(draw(st.integers(0, 3)))
        else:
            sizes.append(draw(st.sampled_from([q for q in range(1, rest + 1) if rest % q == 0])))
            rest //= sizes[-1]
    sizes.append(rest if total else 0)
    if total and draw(st.booleans()):
        sizes[draw(st.integers(0, k - 1))] = -1
    return sizes, lambda x: x.reshape(sizes)


def draw_squeeze(draw, a, t):
    # squeezing a lone element gives a number (torch7), which would end the chain of views
    assume(not (a.size == 1 and a.ndim == 1))
    if draw(st.booleans()) and a.shape.count(1) < a.ndim:
        return [], np.squeeze
    d = draw(st.integers(1, a.ndim))
    keep = a.shape[d - 1] != 1 or a.ndim == 1
    return [d], (lambda x: x) if keep else (lambda x: np.squeeze(x, d - 1))


def draw_unsqueeze(draw, a, t):
    d = draw(st.integers(1, a.ndim + 1))
    return [d], lambda x: np.expand_dims(x, d - 1)


GOOD_OPS = [Op(f.__name__[5:], f) for f in (
    draw_narrow, draw_select, draw_transpose, draw_t, draw_permute, draw_unfold, draw_expand,
    draw_sub, draw_view, draw_squeeze, draw_unsqueeze)]


def draw_index(draw, a):
    """A t[{...}] index table and its numpy index: numbers select, {a, b} / {a} / {} narrow."""
    spec, index = [], []
    for n in a.shape[:draw(st.integers(1, a.ndim))]:
        kinds = ["all", "range", "one"] + (["number"] if n else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "number":
            i = draw(st.integers(1, n) | st.integers(-n, -1))
            spec.append(i)
            index.append(i - 1 if i > 0 else i)
        elif kind == "all":
            spec.append([])
            index.append(slice(None))
        elif kind == "one" and n:
            i = draw(st.integers(1, n))
            spec.append([i])
            index.append(slice(i - 1, i))
        else:
            first = draw(st.integers(1, max(n, 1)))
            last = draw(st.integers(first - 1, n))
            spec.append([first, last])
            index.append(slice(first - 1, last))
    return spec, tuple(index)


@FUZZ
@given(shape=shapes, data=st.data())
def test_random_view_chains_match_numpy(lua_fns, shape, data):
    call, get, _ = lua_fns
    a, t = make_pair(shape)
    for _ in range(data.draw(st.integers(1, 4), label="chain length")):
        if data.draw(st.integers(0, 9), label="index instead") == 0:
            spec, index = draw_index(data.draw, a)
            result, expected = get(t, table(spec)), a[index]
            label = f"t[{spec}]"
        else:
            op = data.draw(st.sampled_from(GOOD_OPS), label="op")
            drawn = op.draw(data.draw, a, t)
            if drawn is None:
                continue
            args, ref = drawn
            result, expected = call(t, op.name, *[table(x) for x in args]), ref(a)
            label = f"{op.name}{tuple(args)} of {a.shape}"
        if np.ndim(expected) == 0:   # a single element comes back as a number
            assert result == expected, label
            return
        got = numpy_of(result)
        assert got.shape == expected.shape, label
        np.testing.assert_array_equal(got, expected, err_msg=label)
        a, t = expected, result


@FUZZ
@given(shape=shapes, data=st.data())
def test_plain_number_indexing(lua_fns, shape, data):
    _, get, _ = lua_fns
    a, t = make_pair(shape)
    if a.shape[0] == 0:
        return
    i = data.draw(st.integers(1, a.shape[0]) | st.integers(-a.shape[0], -1))
    result = get(t, i)
    expected = a[i - 1 if i > 0 else i]
    if a.ndim == 1:
        assert result == expected
    else:
        np.testing.assert_array_equal(numpy_of(result), expected)


# ---------------------------------------------------------------------------------------------
# bad calls

def bad_dim(nd: int):
    return st.sampled_from([0, -1, nd + 1, nd + 7, 1.5, "one", True, [1]])


def bad_number(n: int):
    """Indices refused for a dimension of size n."""
    return st.sampled_from([0, n + 1, -n - 1, n + 100, 1.5, 0.5, float("nan")])


def bad_index(n: int):
    return bad_number(n) | st.sampled_from(["one", False, [1]])


def bad_permutation(draw, nd: int) -> list:
    perm = list(range(1, nd + 1))
    kind = draw(st.sampled_from(["short", "long", "repeat", "range", "type"]))
    if kind == "short":
        return perm[:-1]
    if kind == "long":
        return perm + [nd + 1]
    if kind == "repeat":
        return [1, 1] + perm[2:]
    perm[draw(st.integers(0, nd - 1))] = draw(st.sampled_from([0, nd + 1, 1.5])) if kind == "range" else "x"
    return perm


def bad_expand(draw, shape: list[int], d: int) -> list:
    sizes = list(shape)
    kind = draw(st.sampled_from(["count", "negative", "nan", "non1"]))
    if kind == "count":
        return sizes + [1]
    if kind in ("negative", "nan"):
        sizes[d - 1] = -1 if kind == "negative" else float("nan")   # finite fractions truncate, as torch7
        return sizes
    non1 = [k for k in range(len(shape)) if shape[k] != 1]
    if not non1:
        return sizes + [2]
    k = draw(st.sampled_from(non1))
    sizes[k] = shape[k] + 1
    return sizes


def bad_sub(draw, shape: list[int], d: int) -> list:
    """Valid (first, last) pairs for the dims before d, then a bad pair (or a bad count)."""
    n = shape[d - 1]
    prefix = [v for s in shape[:d - 1] for v in (1, s)]
    kind = draw(st.sampled_from(["odd", "too_many", "first", "last", "reversed", "type"]))
    if kind == "odd":
        return prefix + [1]
    if kind == "too_many":
        return [v for s in shape for v in (1, s)] + [1, 1]
    if kind == "first":
        return prefix + [draw(st.sampled_from([0, n + 2, -n - 2, 1.5])), n]
    if kind == "last":
        return prefix + [1, draw(st.sampled_from([n + 1, -n - 2, 0.5]))]
    if kind == "reversed":
        return prefix + [n + 2, n]
    return prefix + [draw(st.sampled_from(["one", True, [1]])), 1]


def bad_view(draw, shape: list[int], contiguous: bool) -> list:
    total = int(np.prod(shape))
    kind = draw(st.sampled_from(["count", "two_infer", "negative", "fraction", "type"]
                                + ([] if contiguous else ["noncontiguous"])))
    return {
        "count": [total + draw(st.integers(1, 3))],
        "two_infer": [-1, -1, total],
        "negative": [-total, -1] if total else [-2, 0],
        "fraction": [0.5, total * 2],
        "type": ["x"],
        "noncontiguous": [total],
    }[kind]


def bad_index_table(draw, shape: list[int], d: int) -> list:
    """t[{...}]: full dims up to d, then a bad entry; or too many entries; or a bad range."""
    nd, n, n1 = len(shape), shape[d - 1], shape[0]
    kind = draw(st.sampled_from(["number", "type", "count", "range"]))
    # a real number inside the table is truncated as torch7's C cast did ({1.5} is {1}, {0.5} is
    # {1} too: (long)(0.5 - 1) is 0), so only whole numbers out of range are refused there
    if kind == "number":
        return [[]] * (d - 1) + [draw(st.sampled_from([0, n + 1, -n - 1, n + 100, float("nan")]))]
    if kind == "type":
        return [[]] * (d - 1) + [draw(st.sampled_from(["a", True, [1, "x"], [0, 1]]))]
    if kind == "count":
        return [[]] * (nd + draw(st.integers(1, 2)))
    return [draw(st.sampled_from([[0, n1], [1, n1 + 1], [3, 1], [-n1 - 2, 1]]))]


def bad_call(draw, shape: list[int], contiguous: bool) -> tuple[str, list]:
    """A method call (or an index read / write) that must be refused for this shape."""
    nd = len(shape)
    d = draw(st.integers(1, nd))
    n = shape[d - 1]
    kind = draw(st.sampled_from([
        "narrow_dim", "narrow_range", "select_dim", "select_index", "transpose", "permute",
        "unfold_dim", "unfold_size", "unfold_step", "expand", "sub", "view", "squeeze",
        "unsqueeze", "size", "resize", "index", "index_number", "newindex"]))
    if kind == "narrow_dim":
        return "narrow", [draw(bad_dim(nd)), 1, 0]
    if kind == "narrow_range":
        return "narrow", [d, *draw(st.sampled_from([
            (0, 1), (n + 2, 0), (1, n + 1), (1, -1), (n, 2), (1.5, 0), (1, 0.5), ("one", 1), (1, None)]))]
    if kind == "select_dim":
        # torch7 ignores the dim of a 1-D tensor's select when it is >= 1; only smaller ones fail there
        dim = draw(bad_dim(nd))
        if nd == 1 and isinstance(dim, int) and dim >= 1:
            dim = 0
        return "select", [dim, 1]
    if kind == "select_index":
        return "select", [d, draw(bad_index(n))]
    if kind == "transpose":
        return "transpose", draw(st.permutations([d, draw(bad_dim(nd))]))
    if kind == "permute":
        return "permute", bad_permutation(draw, nd)
    if kind == "unfold_dim":
        return "unfold", [draw(bad_dim(nd)), 1, 1]
    if kind == "unfold_size":
        return "unfold", [d, draw(st.sampled_from([n + 1, -1, 1.5, "two", None])), 1]
    if kind == "unfold_step":
        return "unfold", [d, min(n, 1), draw(st.sampled_from([0, -1, 0.5, 1.5, "one", None]))]
    if kind == "expand":
        return "expand", bad_expand(draw, shape, d)
    if kind == "sub":
        return "sub", bad_sub(draw, shape, d)
    if kind == "view":
        return "view", bad_view(draw, shape, contiguous)
    if kind == "squeeze":
        return "squeeze", [draw(st.sampled_from([0, -1, nd + 1, 1.5, "one", True]))]
    if kind == "unsqueeze":
        return "unsqueeze", [draw(st.sampled_from([0, -1, nd + 2, 1.5, "one"]))]
    if kind == "size":
        return draw(st.sampled_from(["size", "stride"])), [draw(bad_dim(nd))]
    if kind == "resize":
        sizes = list(shape)
        sizes[d - 1] = draw(st.sampled_from([-1, -5, float("inf"), "two", float("nan")]))
        return "resize", sizes
    if kind == "index":
        return "__index", [bad_index_table(draw, shape, d)]
    if kind == "index_number":   # t[i]
        return "__index", [draw(bad_number(shape[0]))]
    return "__newindex", [[shape[0] + 1] + [1] * (nd - 1), 5.0]


def state(t: Any) -> tuple:
    """Sizes, strides, offset, storage size and a copy of the values."""
    w = luabridge.wrap(t)
    storage = t._st
    return (list(w.size()), list(w.stride()), t._off, storage._n if storage else None), numpy_of(t).copy()


@FUZZ
@given(shape=shapes, data=st.data())
def test_bad_arguments_raise_and_leave_tensor_unchanged(lua_fns, shape, data):
    call, get, put = lua_fns
    a, t = make_pair(shape)
    if data.draw(st.booleans(), label="use a view") and a.ndim >= 2:
        t = call(t, "transpose", 1, a.ndim)
    contiguous = torch_contiguous(numpy_of(t).shape, list(luabridge.wrap(t).stride()))
    name, args = bad_call(data.draw, list(numpy_of(t).shape), contiguous)
    before, values = state(t)
    with pytest.raises(luabridge.LuaError) as info:
        if name == "__index":
            get(t, table(args[0]))
        elif name == "__newindex":
            put(t, table(args[0]), args[1])
        else:
            call(t, name, *[table(x) for x in args])
    message = info.value.message
    assert "attempt to" not in message and "bad argument" not in message, (name, args, message)
    after, values_after = state(t)
    assert before == after, (name, args)
    np.testing.assert_array_equal(values, values_after)


def test_result_forms_of_expand_as_and_view_as(lua_fns):
    call, _, _ = lua_fns
    src = luabridge.from_numpy(np.array([[1.0], [2.0], [3.0]]))
    template = luabridge.from_numpy(np.zeros((3, 4)))
    result = luabridge.execute("return torch.Tensor()")
    assert luabridge.eval("rawequal")(call(result, "expandAs", src, template), result)
    np.testing.assert_array_equal(numpy_of(result), np.broadcast_to([[1.0], [2.0], [3.0]], (3, 4)))
    flat = luabridge.from_numpy(np.arange(6.0))
    call(result, "viewAs", flat, luabridge.from_numpy(np.zeros((2, 3))))
    np.testing.assert_array_equal(numpy_of(result), np.arange(6.0).reshape(2, 3))
    with pytest.raises(luabridge.LuaError, match="expandAs: argument must be a tensor"):
        call(src, "expandAs", 3)
