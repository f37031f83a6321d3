"""The device side of the CUDA backend (lua/torch/backend/cuda/: core.lua marshals each op here).

A CUDA storage is a 1-D array of an *array module* ``xp``: CuPy when it is importable and sees a
device; numpy only when selected explicitly (``use_array_module(numpy)`` or the environment
variable ``LUABRIDGE_CUDA_ARRAY_MODULE=numpy``), so that the backend runs and is tested on machines
without a GPU. The arrays live in the runtime's buffer registry (``luabridge/core/memory.py``) next to
the CPU buffers, so a CUDA storage is released by the same handle mechanism as a CPU one.

Lua validates every argument, then calls ``cuda_op(name, ...)``: each Lua tensor argument arrives
flattened (see ``Backend.arguments``) and becomes an ``xp`` view (a CPU tensor: a numpy view) built
from (storage id, offset, sizes, strides); the op writes its result into the result view.
Dimensions arrive 0-based; index tensors hold 1-based indices, as in Lua. Random numbers come from
an ``xp.random.RandomState`` per runtime (seeded by ``torch.cudaManualSeed``), so CUDA draws follow
the array module's generator, not torch7's.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ...core.dtypes import CUDA_NAMES, DTYPES, TYPE_OF_DTYPE
from ...core.interop import DEVICES, from_array, memory_span
from ...core.memory import lua_list
from ...core.runtime import bridge as _bridge

if TYPE_CHECKING:
    from ...core.runtime import Bridge

ENV_VAR = "LUABRIDGE_CUDA_ARRAY_MODULE"
_chosen: Any = None        # set by use_array_module
_auto: Any = None          # the detected module, or the reason there is none (a string)
DEVICE, HOST = "\0device", "\0host"   # the markers of flattened tensor arguments (cuda.lua)

def use_array_module(xp: Any) -> None:
    """Makes xp (cupy, or numpy standing in for it) the module behind CUDA storages; None: detect."""
    global _chosen
    _chosen = xp


def _detect() -> Any:
    """CuPy with a visible device, else a string saying why not."""
    name = os.environ.get(ENV_VAR, "")
    if name == "numpy":
        return np
    try:
        import cupy
    except ImportError:
        return f"no CUDA device: CuPy is not installed (set {ENV_VAR}=numpy to run the CUDA backend on numpy)"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver / no device: CuPy raises its runtime error
        return f"no CUDA device: {e}"
    return cupy if count > 0 else "no CUDA device: CuPy sees no GPU"


def array_module() -> Any:
    """The module behind CUDA storages; RuntimeError when there is none."""
    global _auto
    if _chosen is not None:
        return _chosen
    if _auto is None or isinstance(_auto, str):
        _auto = _detect()
    if isinstance(_auto, str):
        raise RuntimeError(_auto)
    return _auto


def to_host(x: Any) -> np.ndarray:
    """A numpy array with x's values (a copy from the device under CuPy; x itself under numpy)."""
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def _address(x: Any) -> int:
    return x.data.ptr if not isinstance(x, np.ndarray) else x.ctypes.data


# ----------------------------------------------------------------------------------------------
# views of Lua tensors

class Backend:
    """One runtime's CUDA state: views of its device buffers and its random generator."""

    def __init__(self, bridge: "Bridge") -> None:
        self.bridge = bridge
        self.xp: Any = None     # the array module, refreshed at every entry from Lua or Python
        self._random: Any = None
        self._random_xp: Any = None

    def alloc(self, n: int, np_dtype: str) -> tuple[Any, Any]:
        """A zeroed device buffer of n elements registered with the runtime: (id, None) or (None, why)."""
        try:
            self.xp = array_module()
        except RuntimeError as e:
            return None, str(e)
        return self.bridge.buffers.register(self.xp.zeros(max(int(n), 1), dtype=np_dtype)), None

    def register(self, span: Any) -> int:
        return self.bridge.buffers.register(span)

    def view(self, t: Any) -> Any:
        """The xp view of a Lua CUDA tensor (sharing its memory)."""
        self.xp = array_module()
        st = t._st
        return self.device_view(st._id if st else 0, t._off + st._baseoff if st else 0, t._dt.np,
                                lua_list(t._sz), lua_list(t._str))

    def device_view(self, buffer_id: int, offset: int, dtype: str, sizes: Any, strides: Any) -> Any:
        shape = tuple(sizes) or (0,)
        if not buffer_id or 0 in shape:   # no element: its offset may lie anywhere
            return self.xp.empty(shape, dtype=dtype)
        base = self.bridge.buffers.array(buffer_id)
        item = base.itemsize
        steps = tuple(s * item for s in strides) or (item,)
        if isinstance(base, np.ndarray):  # numpy standing in: the direct constructor is the fast one
            return np.ndarray(shape, base.dtype, base, offset * item, steps)
        return self.xp.lib.stride_tricks.as_strided(base[offset:], shape=shape, strides=steps)

    def arguments(self, raw: tuple) -> list:
        """Lua's flattened arguments with each tensor as an array. A tensor comes as its kind
        (DEVICE or HOST), storage id (0: none), element offset, dtype name (numpy's for a device
        tensor, luabridge.memory's for a host one), dim count n, n sizes and n strides."""
        out, i = [], 0
        while i < len(raw):
            a = raw[i]
            if a == DEVICE or a == HOST:
                buffer_id, offset, dtype, nd = raw[i + 1:i + 5]
                sizes, strides = raw[i + 5:i + 5 + nd], raw[i + 5 + nd:i + 5 + 2 * nd]
                if a == DEVICE:
                    out.append(self.device_view(buffer_id, offset, dtype, sizes, strides))
                elif buffer_id:
                    out.append(self.bridge.buffers.view(buffer_id, dtype, offset, sizes, strides))
                else:
                    out.append(np.empty(sizes or (0,), dtype=DTYPES[dtype]))
                i += 5 + 2 * nd
            else:
                out.append(a)
                i += 1
        return out

    def random(self) -> Any:
        if self._random is None or self._random_xp is not self.xp:
            self._random, self._random_xp = self.xp.random.RandomState(), self.xp
        return self._random

    def seed(self, seed: int) -> None:
        self._random, self._random_xp = self.xp.random.RandomState(int(seed)), self.xp

    def call(self, name: str, *args: Any) -> Any:
        """Lua's cuda_op: the op name, then the flattened arguments."""
        self.xp = array_module()
        values = self.arguments(args)
        with np.errstate(all="ignore"):  # C semantics: integer division by zero, NaN casts...
            return OPS[name](self, *values)


# ----------------------------------------------------------------------------------------------
# ops: fn(backend, *args); tensors are views, dims 0-based

OPS: dict[str, Callable[..., Any]] = {}


def op(fn: Callable[..., Any]) -> Callable[..., Any]:
    OPS[fn.__name__] = fn
    return fn


def _scalar(v: Any, like: Any) -> Any:
    """v as an element of like's type, as C converts it (truncation, wrap-around)."""
    dtype = like.dtype
    if dtype.kind == "f":   # rounding to the nearest, as astype does (the direct path is faster)
        return dtype.type(v)
    return np.array(v).astype(dtype)[()]


def _shaped(x: Any, like: Any) -> Any:
    """x with like's shape (same element count; torch7 pairs elements in row-major order)."""
    return x if x.shape == like.shape else x.reshape(like.shape)


def _operand(b: Backend, x: Any, like: Any) -> Any:
    """A number or an array as an operand of like's type and shape."""
    if isinstance(x, (int, float)):
        return _scalar(x, like)
    return _shaped(b.xp.asarray(x), like)


def _number(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def _is_int(a: Any) -> bool:
    return a.dtype.kind in "iu"


def _acc(a: Any) -> Any:
    """torch7's accumulation type: double for floating types, long for integers."""
    return np.int64 if _is_int(a) else np.float64


def _div(xp: Any, a: Any, b: Any) -> Any:
    """C division: truncated towards zero for integers."""
    if not _is_int(a):
        return xp.true_divide(a, b)
    q = xp.floor_divide(a, b)
    return q + ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)


def _pow(xp: Any, a: Any, b: Any) -> Any:
    if _is_int(a):  # negative integer exponents: through doubles, truncated on the way back
        return xp.power(a.astype(np.float64), b)
    return xp.power(a, b)


# The unsigned type of each integer width: shifts move the bits of the unsigned value, as C's.
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _shift(left: bool) -> Callable[[Any, Any, Any], Any]:
    """lshift / rshift as the CPU's: integers shift their unsigned bits (in uint64), the count taken
    modulo 32, or 64 for Long (the lanes of LuaJIT's bit ops); Float and Double (a tensor of counts:
    the front end turns a number into mul / div) are multiplied or divided by 2^count, as torch7."""
    def run(xp: Any, a: Any, count: Any) -> Any:
        if not _is_int(a):
            scale = xp.power(2.0, xp.asarray(count, dtype=np.float64))
            wide = a.astype(np.float64)
            return wide * scale if left else wide / scale
        lanes = 64 if a.itemsize == 8 else 32
        bits = a.astype(UNSIGNED[a.itemsize]).astype(np.uint64)
        by = (xp.asarray(count).astype(np.int64) & (lanes - 1)).astype(np.uint64)
        return bits << by if left else bits >> by   # the result's cast keeps its low bits
    return run


BINARY: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda xp, a, b: a + b,
    "sub": lambda xp, a, b: a - b,
    "mul": lambda xp, a, b: a * b,
    "div": _div,
    "fmod": lambda xp, a, b: xp.fmod(a, b),
    "remainder": lambda xp, a, b: xp.remainder(a, b),
    "pow": _pow,
    "tpow": lambda xp, a, b: _pow(xp, b, a),   # value ^ tensor
    "max": lambda xp, a, b: xp.maximum(a, b),
    "min": lambda xp, a, b: xp.minimum(a, b),
    "atan2": lambda xp, a, b: xp.arctan2(a, b),
    "lt": lambda xp, a, b: a < b,
    "le": lambda xp, a, b: a <= b,
    "gt": lambda xp, a, b: a > b,
    "ge": lambda xp, a, b: a >= b,
    "eq": lambda xp, a, b: a == b,
    "ne": lambda xp, a, b: a != b,
    "lshift": _shift(True),
    "rshift": _shift(False),
    "bitand": lambda xp, a, b: a & b,   # integer types only (the front end's check)
    "bitor": lambda xp, a, b: a | b,
    "bitxor": lambda xp, a, b: a ^ b,
}

UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "exp": lambda xp, a: xp.exp(a),
    "log": lambda xp, a: xp.log(a),
    "log1p": lambda xp, a: xp.log1p(a),
    "sqrt": lambda xp, a: xp.sqrt(a),
    "rsqrt": lambda xp, a: 1 / xp.sqrt(a),
    "sin": lambda xp, a: xp.sin(a),
    "cos": lambda xp, a: xp.cos(a),
    "tan": lambda xp, a: xp.tan(a),
    "asin": lambda xp, a: xp.arcsin(a),
    "acos": lambda xp, a: xp.arccos(a),
    "atan": lambda xp, a: xp.arctan(a),
    "sinh": lambda xp, a: xp.sinh(a),
    "cosh": lambda xp, a: xp.cosh(a),
    "tanh": lambda xp, a: xp.tanh(a),
    "sigmoid": lambda xp, a: 1 / (1 + xp.exp(-a)),
    "floor": lambda xp, a: xp.floor(a),
    "ceil": lambda xp, a: xp.ceil(a),
    "round": lambda xp, a: xp.sign(a) * xp.floor(xp.abs(a) + 0.5),  # C round: half away from 0
    "trunc": lambda xp, a: xp.trunc(a),
    "frac": lambda xp, a: a - xp.trunc(a),
    "cinv": lambda xp, a: 1 / a,
    "abs": lambda xp, a: xp.abs(a),
    "sign": lambda xp, a: (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype),   # torch7's: 0 for NaN
    "neg": lambda xp, a: -a,
}


@op
def fill(b: Backend, r: Any, v: Any) -> None:
    r[...] = _scalar(v, r)


@op
def copy(b: Backend, r: Any, a: Any) -> None:
    """Device to device, across element types."""
    r[...] = _shaped(a, r)


@op
def upload(b: Backend, r: Any, host: np.ndarray) -> None:
    r[...] = b.xp.asarray(_shaped(host, r))


@op
def download(b: Backend, host: np.ndarray, a: Any) -> None:
    np.copyto(host, _shaped(to_host(a), host), casting="unsafe")


@op
def item(b: Backend, a: Any) -> Any:
    return a.item()


@op
def unary(b: Backend, name: str, r: Any, a: Any) -> None:
    r[...] = UNARY[name](b.xp, _shaped(a, r))


@op
def binary(b: Backend, name: str, r: Any, x: Any, y: Any) -> None:
    """r = x (op) y, y a tensor or a number of x's type."""
    x = _shaped(x, r)
    r[...] = BINARY[name](b.xp, x, _operand(b, y, x))


@op
def add(b: Backend, r: Any, x: Any, v: Any, y: Any) -> None:
    """r = x + v * y (y a tensor), x + v without y."""
    x = _shaped(x, r)
    r[...] = x + _scalar(v, x) if y is None else x + _scalar(v, x) * _shaped(y, x)


@op
def addcmul(b: Backend, r: Any, x: Any, v: Any, y: Any, z: Any) -> None:
    x = _shaped(x, r)
    r[...] = x + _scalar(v, x) * _shaped(y, x) * _shaped(z, x)


@op
def addcdiv(b: Backend, r: Any, x: Any, v: Any, y: Any, z: Any) -> None:
    x = _shaped(x, r)
    r[...] = x + _div(b.xp, _scalar(v, x) * _shaped(y, x), _shaped(z, x))


@op
def clamp(b: Backend, r: Any, x: Any, lo: Any, hi: Any) -> None:
    """torch7's rule, which min(max(x, lo), hi) is only while lo <= hi: lo below lo, else hi above
    hi (so with lo > hi, lo or hi as x is below lo or not); NaN stays."""
    xp, x = b.xp, _shaped(x, r)
    lo, hi = _scalar(lo, x), _scalar(hi, x)
    r[...] = xp.where(x < lo, lo, xp.where(x > hi, hi, x))


@op
def lerp(b: Backend, r: Any, x: Any, y: Any, w: Any) -> None:
    x = _shaped(x, r)
    r[...] = x + _scalar(w, x) * (_shaped(y, x) - x)


# ----------------------------------------------------------------------------------------------
# reductions and scans

def _norm(xp: Any, a: Any, p: float, axis: Any) -> Any:
    a = a.astype(_acc(a))
    if p == 0:
        return xp.sum(a != 0, axis=axis, keepdims=axis is not None).astype(a.dtype)
    return xp.sum(xp.abs(a) ** p, axis=axis, keepdims=axis is not None) ** (1.0 / p)


REDUCE: dict[str, Callable[..., Any]] = {
    "sum": lambda xp, a, axis, _: xp.sum(a, axis=axis, dtype=_acc(a), keepdims=axis is not None),
    "prod": lambda xp, a, axis, _: xp.prod(a, axis=axis, dtype=_acc(a), keepdims=axis is not None),
    "mean": lambda xp, a, axis, _: xp.mean(a, axis=axis, dtype=_acc(a), keepdims=axis is not None),
    "max": lambda xp, a, axis, _: xp.max(a, axis=axis, keepdims=axis is not None),
    "min": lambda xp, a, axis, _: xp.min(a, axis=axis, keepdims=axis is not None),
    "var": lambda xp, a, axis, biased: xp.var(a, axis=axis, dtype=_acc(a), ddof=0 if biased else 1,
                                              keepdims=axis is not None),
    "std": lambda xp, a, axis, biased: xp.std(a, axis=axis, dtype=_acc(a), ddof=0 if biased else 1,
                                              keepdims=axis is not None),
    "norm": lambda xp, a, axis, p: _norm(xp, a, p, axis),
    "all": lambda xp, a, axis, _: xp.all(a != 0, axis=axis, keepdims=axis is not None),
    "any": lambda xp, a, axis, _: xp.any(a != 0, axis=axis, keepdims=axis is not None),
}


@op
def reduce_all(b: Backend, name: str, a: Any, param: Any) -> Any:
    """The reduction of every element, as a Python number (or boolean for all / any)."""
    return _number(REDUCE[name](b.xp, a, None, param))


@op
def reduce_dim(b: Backend, name: str, r: Any, a: Any, dim: int, param: Any) -> None:
    """r (a's sizes with 1 at dim) = the reduction along dim."""
    r[...] = REDUCE[name](b.xp, a, dim, param)


@op
def argreduce(b: Backend, name: str, r: Any, idx: Any, a: Any, dim: int) -> None:
    """max / min along dim: values into r, 1-based positions (the first one) into idx."""
    xp = b.xp
    i = (xp.argmax if name == "max" else xp.argmin)(a, axis=dim)
    i = xp.expand_dims(i, dim)
    r[...] = a[_along(xp, i, dim)]
    idx[...] = i + 1


@op
def scan(b: Backend, name: str, r: Any, a: Any, dim: int) -> None:
    r[...] = (b.xp.cumsum if name == "cumsum" else b.xp.cumprod)(a, axis=dim, dtype=_acc(a))


@op
def histc(b: Backend, h: Any, x: Any, lo: float, hi: float) -> None:
    """h (host doubles: nbins, or rows x nbins for one histogram per row of the matrix x) += the
    counts of x's elements in nbins equal bins over [lo, hi], as the CPU's: the bin of v is
    floor((v - lo) / (hi - lo) * nbins) in double, hi in the last one; values outside (NaN too)
    are not counted. (math/join.lua has already made a float32 tensor's bounds float32 values.)"""
    xp = b.xp
    nbins = h.shape[-1]
    v = x.astype(np.float64).reshape(h.shape[:-1] + (-1,))
    inside = (v >= lo) & (v <= hi)
    bins = xp.minimum(xp.floor((v - lo) / (hi - lo) * nbins), nbins - 1)
    if h.ndim == 2:
        bins = bins + (xp.arange(h.shape[0]) * nbins)[:, None]
    counted = bins[inside].astype(np.int64)
    if counted.size:   # (older CuPy's bincount takes no empty array)
        h += to_host(xp.bincount(counted, minlength=h.size)).reshape(h.shape)


@op
def dot(b: Backend, x: Any, y: Any) -> Any:
    xp = b.xp
    acc = _acc(x)
    return _number(xp.sum(x.ravel().astype(acc) * y.ravel().astype(acc)))


@op
def equal(b: Backend, x: Any, y: Any) -> bool:
    return bool(b.xp.array_equal(x, y))


@op
def gemm(b: Backend, r: Any, beta: float, m: Any, alpha: float, x: Any, y: Any, batch_sum: bool) -> None:
    """r = beta * m + alpha * x @ y (summed over the batch when batch_sum); m unread when beta is 0."""
    xp = b.xp
    p = xp.matmul(x, y)
    if batch_sum:
        p = p.sum(axis=0, dtype=p.dtype)
    p = p * _scalar(alpha, p) if alpha != 1 else p
    r[...] = p if beta == 0 else _scalar(beta, r) * _shaped(m, r) + p


# ----------------------------------------------------------------------------------------------
# indexing

def _index(b: Backend, idx: Any) -> Any:
    """1-based Lua indices as 0-based device indices."""
    return b.xp.asarray(idx).astype(np.int64) - 1


def _along(xp: Any, i: Any, dim: int) -> tuple:
    """Advanced indices picking i's positions along dim and its own position elsewhere."""
    nd = i.ndim
    return tuple(i if d == dim else xp.arange(i.shape[d]).reshape([-1 if k == d else 1 for k in range(nd)])
                 for d in range(nd))


def _mask(b: Backend, m: Any, like: Any) -> Any:
    return _shaped(b.xp.asarray(m), like) != 0


@op
def index_select(b: Backend, r: Any, a: Any, dim: int, idx: Any) -> None:
    r[...] = b.xp.take(a, _index(b, idx), axis=dim)


def _slices(xp: Any, r: Any, dim: int, src: Any) -> tuple[Any, Any]:
    """r and src with dim first; src's slices shaped as r's (they match element for element)."""
    target, values = xp.moveaxis(r, dim, 0), xp.moveaxis(src, dim, 0)
    return target, values.reshape(values.shape[:1] + target.shape[1:])


@op
def index_copy(b: Backend, r: Any, dim: int, idx: Any, src: Any) -> None:
    target, values = _slices(b.xp, r, dim, src)
    target[_index(b, idx)] = values


@op
def index_add(b: Backend, r: Any, dim: int, idx: Any, src: Any) -> None:
    xp = b.xp
    target, values = _slices(xp, r, dim, src)
    if hasattr(xp.add, "at"):
        xp.add.at(target, _index(b, idx), values)
    else:  # older CuPy
        import cupyx

        cupyx.scatter_add(target, _index(b, idx), values)


@op
def index_fill(b: Backend, r: Any, dim: int, idx: Any, v: Any) -> None:
    b.xp.moveaxis(r, dim, 0)[_index(b, idx)] = _scalar(v, r)


@op
def gather(b: Backend, r: Any, a: Any, dim: int, idx: Any) -> None:
    r[...] = a[_along(b.xp, _index(b, idx), dim)]


@op
def scatter(b: Backend, r: Any, dim: int, idx: Any, src: Any) -> None:
    """r[.., idx[i], ..] = src[.., i, ..] along dim (src a tensor at least idx's size, or a number)."""
    i = _index(b, idx)
    if isinstance(src, (int, float)):
        values = _scalar(src, r)
    else:
        values = src[tuple(slice(0, n) for n in i.shape)]
    r[_along(b.xp, i, dim)] = values


@op
def masked_fill(b: Backend, r: Any, mask: Any, v: Any) -> None:
    r[_mask(b, mask, r)] = _scalar(v, r)


@op
def masked_copy(b: Backend, r: Any, mask: Any, src: Any) -> None:
    m = _mask(b, mask, r)
    r[m] = src.ravel()[: int(m.sum())]


@op
def masked_select(b: Backend, r: Any, a: Any, mask: Any) -> None:
    r[...] = a[_mask(b, mask, a)]


@op
def count_nonzero(b: Backend, a: Any) -> int:
    return int(b.xp.count_nonzero(b.xp.asarray(a)))


@op
def nonzero(b: Backend, r: Any, a: Any) -> None:
    """The 1-based positions of a's nonzero elements, one row each (r is count x a.ndim)."""
    xp = b.xp
    if r.size:
        r[...] = xp.stack(xp.nonzero(a), axis=1) + 1


@op
def minmax(b: Backend, a: Any) -> tuple[Any, Any]:
    """The smallest and largest element (for index checks)."""
    return _number(a.min()), _number(a.max())


# ----------------------------------------------------------------------------------------------
# sorting

def _argsort(xp: Any, a: Any, dim: int) -> Any:
    """Stable argsort (CuPy's always is, and takes no kind)."""
    return xp.argsort(a, axis=dim, kind="stable") if xp is np else xp.argsort(a, axis=dim)


def _span_along(a: Any, dim: int, part: slice) -> Any:
    return a[tuple(part if d == dim else slice(None) for d in range(a.ndim))]


@op
def sort(b: Backend, r: Any, idx: Any, a: Any, dim: int, descending: bool) -> None:
    xp = b.xp
    i = _argsort(xp, a, dim)
    if descending:
        i = xp.flip(i, axis=dim)
    r[...] = a[_along(xp, i, dim)]
    idx[...] = i + 1


@op
def topk(b: Backend, r: Any, idx: Any, a: Any, k: int, dim: int, largest: bool) -> None:
    """The k largest (descending) or smallest (ascending) along dim, sorted."""
    xp = b.xp
    i = _argsort(xp, a, dim)
    n = a.shape[dim]
    i = _span_along(i, dim, slice(n - 1, n - 1 - k if k < n else None, -1) if largest else slice(0, k))
    r[...] = a[_along(xp, i, dim)]
    idx[...] = i + 1


@op
def kthvalue(b: Backend, r: Any, idx: Any, a: Any, k: int, dim: int) -> None:
    xp = b.xp
    i = _span_along(_argsort(xp, a, dim), dim, slice(k - 1, k))
    r[...] = a[_along(xp, i, dim)]
    idx[...] = i + 1


@op
def mode(b: Backend, r: Any, idx: Any, a: Any, dim: int) -> None:
    """The most frequent value along dim (the smallest of equally frequent ones) into r and the
    1-based position of its last occurrence into idx, as the CPU's runs over a stable sort: NaN
    sorts last and each NaN is a run of its own."""
    xp = b.xp
    n = a.shape[dim]
    rows = xp.moveaxis(a, dim, -1).reshape(-1, n)
    if rows.shape[0] == 0:
        return
    order = _argsort(xp, rows, 1)
    v = xp.take_along_axis(rows, order, 1)
    starts = xp.ones(v.shape, dtype=bool)
    starts[:, 1:] = v[:, 1:] != v[:, :-1]
    # each position's run length, through the runs of the flattened rows (a row starts a run)
    flat = starts.ravel()
    first = xp.flatnonzero(flat)
    lengths = xp.diff(xp.concatenate((first, xp.asarray([flat.size]))))
    run = lengths[xp.cumsum(flat, dtype=np.int64) - 1].reshape(v.shape)
    ends = xp.ones(v.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    last = xp.argmax(xp.where(ends, run, 0), axis=1)[:, None]   # the first longest: the smallest
    values, positions = xp.moveaxis(r, dim, -1), xp.moveaxis(idx, dim, -1)   # views: rows x 1
    values[...] = xp.take_along_axis(v, last, 1).reshape(values.shape)
    positions[...] = (xp.take_along_axis(order, last, 1) + 1).reshape(positions.shape)


# ----------------------------------------------------------------------------------------------
# random numbers (the array module's generator)

def _lognormal(rs: Any, mean: float, std: float, shape: tuple) -> Any:
    """torch7's logNormal(mean, std): mean and std of the log-normal values themselves."""
    zm, zs = mean * mean, std * std
    return rs.lognormal(np.log(zm / np.sqrt(zs + zm)), np.sqrt(np.log(zs / zm + 1)), shape)


RANDOM: dict[str, Callable[..., Any]] = {
    "uniform": lambda rs, a, c, shape: rs.uniform(a, c, shape),
    "normal": lambda rs, mean, std, shape: rs.normal(mean, std, shape),
    "cauchy": lambda rs, median, sigma, shape: median + sigma * rs.standard_cauchy(shape),
    "logNormal": _lognormal,
    "exponential": lambda rs, lam, _, shape: rs.exponential(1.0 / lam, shape),
    "geometric": lambda rs, p, _, shape: rs.geometric(p, shape),
    "bernoulli": lambda rs, p, _, shape: rs.random_sample(shape) < p,
    "random": lambda rs, lo, hi, shape: rs.randint(lo, hi + 1, shape, dtype=np.int64),
}


@op
def random(b: Backend, name: str, r: Any, p1: Any, p2: Any) -> None:
    if r.size:
        if not isinstance(p1, (int, float)):  # bernoulli with a tensor of probabilities
            p1 = _shaped(b.xp.asarray(p1, dtype=np.float64), r)
        r[...] = RANDOM[name](b.random(), p1, p2, r.shape)


@op
def seed(b: Backend, value: int) -> None:
    b.seed(value)


# ----------------------------------------------------------------------------------------------
# the provider interface and the interop entry points

def _backend(bridge: "Bridge") -> Backend:
    be = getattr(bridge, "cuda_backend", None)
    if be is None:
        be = bridge.cuda_backend = Backend(bridge)
    return be


def callbacks(bridge: "Bridge") -> dict[str, Callable[..., Any]]:
    """The functions lua/torch/backend/cuda/core.lua calls (registered by luabridge/providers/__init__.py)."""
    be = _backend(bridge)
    return {
        "cuda_alloc": be.alloc,
        "cuda_op": be.call,
    }


class DeviceArrays:
    """CUDA tensors seen from Python (interop.DEVICES["cuda"]): arrays of the array module over
    their memory (CuPy device arrays; numpy standing in), and device arrays shared in."""

    dlpack_types = (2, 13)   # kDLCUDA, kDLCUDAManaged: what xp.from_dlpack takes
    # fuse.py's kernel(group, evaluate), set at start-up: the graph's "gpu fusion" executors
    # run their fused groups through it
    fused_kernel: Any = None

    def array_module(self) -> Any:
        """The module of CUDA arrays (CuPy, or numpy standing in); RuntimeError when none."""
        return array_module()

    def view(self, t: Any) -> Any:
        return _backend(_bridge()).view(t)

    def to_host(self, x: Any) -> np.ndarray:
        return to_host(x)

    def share(self, x: Any) -> Any:
        """A Lua CUDA tensor sharing the memory of x: an array of the array module, or a DLPack
        producer on the device (taken by xp.from_dlpack)."""
        xp = array_module()
        if not isinstance(x, xp.ndarray):
            x = xp.from_dlpack(x)
        b = _bridge()
        g = b.lua.globals()
        if g.torch is None:
            b.call(g.require, "torch")
        if x.dtype not in TYPE_OF_DTYPE:
            raise TypeError(f"from_device_array: unsupported dtype {x.dtype} (supported: "
                            + ", ".join(str(d) for d in DTYPES.values()) + ")")
        name = CUDA_NAMES[TYPE_OF_DTYPE[x.dtype]]
        whole, offset, strides = memory_span(x, xp, _address)
        storage = g.torch._cudaStorageFromBuffer(name, _backend(b).register(whole), whole.size)
        return from_array(b, g.torch[name + "Tensor"], storage, offset, x.shape, strides)


ARRAYS = DeviceArrays()
from_device_array = ARRAYS.share
DEVICES["cuda"] = ARRAYS   # interop (and the graph's CUDA sessions) serve CUDA tensors through this from start-up on
