"""Helpers shared by the test files (`from helpers import ...`; pytest puts tests/ on sys.path).

Lua functions callable from Python, numpy arrays in and out of tensors, an array's values in
other memory layouts, random operands, tolerances and error checks; then the elementwise
machinery of test_pointwise.py and test_compare.py (every type, layout and call form).
"""
from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import luabridge
from luabridge.core.runtime import bridge

# Files written by real Torch7, in ../shared/ beside the checkout: CI has them, a fresh clone does not.
T7_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "t7"
needs_t7_fixtures = pytest.mark.skipif(
    not T7_FIXTURES.is_dir(), reason="needs the Torch7-written files of ../shared/fixtures/t7 (not beside this checkout)")


BENCH = Path(__file__).resolve().parent.parent / "bench"


def in_fresh_thread(fn: Callable[[], Any]) -> Any:
    """fn() in a new thread, so in a runtime of its own (as a Ray or threads worker's); its
    result, or its exception raised here."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:   # noqa: BLE001 - handed to the caller as is
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def run_script(folder: Path, source: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`luabridge th s.lua ARGS` on source written to folder/s.lua, run in folder: a whole program,
    its exit status and output as a user would see them."""
    (folder / "s.lua").write_text(source)
    th = [str(Path(sys.executable).with_name("luabridge")), "th"]
    return subprocess.run([*th, "s.lua", *args], cwd=folder, capture_output=True, text=True, timeout=timeout)


def load_bench(file: str, name: str) -> Any:
    """bench/<file> loaded as the module `name` (the benches import their neighbours, such as
    machine and nn_models, so bench/ is on sys.path while it loads)."""
    import importlib.util

    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module   # dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def T(a: np.ndarray) -> Any:  # noqa: N802 - reads like torch.Tensor
    """A tensor viewing a's memory."""
    return luabridge.from_numpy(a)


def N(t: Any) -> np.ndarray:  # noqa: N802
    """A copy of a tensor's values."""
    return luabridge.to_numpy(t).copy()


def lua_arg(x: Any) -> Any:
    return luabridge.from_numpy(x) if isinstance(x, np.ndarray) else x


def lua_fn(code: str) -> Callable[..., Any]:
    """The Lua function `code` evaluates to, with torch loaded, callable from Python in any
    thread (compiled once in each thread's runtime). numpy arrays among the arguments go in as
    tensors viewing their memory; a Lua error raises luabridge.LuaError."""
    per_thread = threading.local()

    def fn(*args: Any) -> Any:
        compiled = getattr(per_thread, "fn", None)
        if compiled is None:
            luabridge.require("torch")
            compiled = per_thread.fn = luabridge.eval(code)
        return bridge().call(compiled, *map(lua_arg, args))

    return fn


call = lua_fn("function(name, ...) return torch[name](...) end")                  # torch.name(...)
method = lua_fn("function(name, self, ...) return self[name](self, ...) end")   # self:name(...)


_lua_table = lua_fn("function(...) return {...} end")


def lua_value(v: Any) -> Any:
    """numpy arrays as tensors sharing their memory, lists and tuples as Lua tables (nested)."""
    if isinstance(v, np.ndarray):
        return luabridge.from_numpy(v)
    if isinstance(v, (list, tuple)):
        return _lua_table(*[lua_value(e) for e in v])
    return v


def numpy_of(t: Any) -> Any:
    """A tensor as a numpy copy, a Lua table of them as a list (nested)."""
    if luabridge.eval("torch.isTensor")(t):
        return luabridge.to_numpy(t).copy()
    return [numpy_of(t[i]) for i in range(1, len(t) + 1)]


def numeric_grad(loss: Callable[[], float], values: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d loss / d values by central differences, perturbing `values` (any layout) in place."""
    grad = np.zeros(values.shape)
    for idx in np.ndindex(values.shape):
        old = values[idx]
        values[idx] = old + eps
        up = loss()
        values[idx] = old - eps
        down = loss()
        values[idx] = old
        grad[idx] = (up - down) / (2 * eps)
    return grad


def assert_lua_error(code: str, message: str) -> None:
    """Running the Lua chunk `code` raises a LuaError whose message contains `message`."""
    with pytest.raises(luabridge.LuaError, match=re.escape(message)):
        luabridge.execute(code)


def assert_lua_errors(cases: list[tuple[str, str]], *args: Any) -> None:
    """Each (Lua function source, regular expression) case: the function called with args
    raises a LuaError that the expression matches."""
    for code, pattern in cases:
        with pytest.raises(luabridge.LuaError, match=pattern):
            lua_fn(code)(*args)


# ----------------------------------------------------------------------------------------------
# operands

LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


def layout(a: np.ndarray, kind: str) -> np.ndarray:
    """a's values in the named memory layout: row-major, column-major, a strided view with an
    offset (steps 2, 3, 2, ... per dim), or reversed (negative strides in every dim)."""
    if kind == "contiguous":
        return a.copy()
    if kind == "transposed":
        return np.asfortranarray(a)
    if kind == "strided":
        steps = [2 + d % 2 for d in range(a.ndim)]
        big = np.zeros(tuple(s * n + 1 for s, n in zip(steps, a.shape)), a.dtype)
        view = big[tuple(slice(1, None, s) for s in steps)]
        view[...] = a
        return view
    if kind == "reversed":
        flip = (slice(None, None, -1),) * a.ndim
        return a[flip].copy()[flip]
    raise ValueError(kind)


def views(a: np.ndarray) -> list[np.ndarray]:
    """a's values in every layout of LAYOUTS."""
    return [layout(a, kind) for kind in LAYOUTS]


def draw(rng: np.random.Generator, shape: Any, dtype: Any, low: float = -4, high: float = 4) -> np.ndarray:
    """Uniform values in [low, high), rounded to integers for an integer dtype."""
    a = rng.uniform(low, high, size=shape)
    return (np.round(a) if np.dtype(dtype).kind in "iu" else a).astype(dtype)


def tol(dtype: Any, single: float = 1e-4, double: float = 1e-12) -> dict:
    """assert_allclose's rtol and atol for results of float32 or float64 arithmetic."""
    eps = single if dtype == np.float32 else double
    return dict(rtol=eps, atol=eps)


# ----------------------------------------------------------------------------------------------
# elementwise ops: every element type, layout and call form (test_pointwise.py, test_compare.py)

FLOATS = ["Float", "Double"]
INTEGERS = ["Byte", "Char", "Short", "Int", "Long"]
NP = {"Byte": np.uint8, "Char": np.int8, "Short": np.int16, "Int": np.int32, "Long": np.int64,
      "Float": np.float32, "Double": np.float64}   # torch type name -> numpy dtype


def values(rng: np.random.Generator, shape: tuple[int, ...], type_name: str, domain: str) -> np.ndarray:
    """Random elements of the type: floats in the domain, integers in a small range."""
    dtype = NP[type_name]
    if type_name in INTEGERS:
        lo = 0 if type_name == "Byte" else -20
        hi = 40 if domain != "positive" else 12
        x = rng.integers(1 if domain in ("positive", "nonzero") else lo, hi, shape)
        if domain == "nonzero" and type_name != "Byte":
            x = x * rng.choice([-1, 1], shape)
        return x.astype(dtype)
    ranges = {"any": (-3, 3), "positive": (0.1, 3), "unit": (-0.95, 0.95), "nonzero": (0.2, 3)}
    lo, hi = ranges[domain]
    x = rng.uniform(lo, hi, shape)
    if domain == "nonzero":
        x = x * rng.choice([-1, 1], shape)
    return x.astype(dtype)


def shaped_layouts(rng: np.random.Generator) -> list[tuple[str, Callable]]:
    """(name, build) per layout over one random 2-D shape: build(make) views an array that
    make(shape) fills."""
    m, n = (int(x) for x in rng.integers(1, 7, 2))
    return [
        ("contiguous", lambda f: f((m, n))),
        ("transposed", lambda f: f((n, m)).T),
        ("narrowed", lambda f: f((m, n + 3))[:, 1:n + 1]),
        ("strided", lambda f: f((2 * m, n))[::2]),
        ("reversed", lambda f: f((m, n))[:, ::-1]),
        ("1-D", lambda f: f((m * n,))),
        ("3-D permuted", lambda f: f((n, 2, m)).transpose(2, 1, 0)),
        ("empty", lambda f: f((0, n))),
    ]


def operands(rng, type_name: str, domains: list[str]) -> Iterator[tuple[str, list[np.ndarray]]]:
    """Operand lists (one array per domain) of one shape, per layout: the first operand's, the
    others taking the next layouts round where those give the same shape."""
    builds = shaped_layouts(rng)

    def maker(domain: str) -> Callable:
        return lambda shape: values(rng, shape, type_name, domain)

    for i, (name, build) in enumerate(builds):
        arrays = [builds[(i + k) % len(builds)][1](maker(d)) for k, d in enumerate(domains)]
        if any(a.shape != arrays[0].shape for a in arrays):
            arrays = [build(maker(d)) for d in domains]
        yield name, arrays


# float32 results may be a few ulps off numpy's float64 (numpy's SIMD loops, rounding steps)
TOLERANCE = {"Float": dict(rtol=2e-6, atol=1e-6), "Double": dict(rtol=1e-12, atol=1e-12)}


def expect(got: Any, want: np.ndarray, type_name: str, what: str) -> None:
    """got (a tensor or an array) has want's shape and values, with the type's element dtype."""
    arr = luabridge.to_numpy(got) if not isinstance(got, np.ndarray) else got
    assert arr.dtype == NP[type_name], what
    assert arr.shape == want.shape, what
    if type_name in INTEGERS:
        np.testing.assert_array_equal(arr, np.asarray(want).astype(arr.dtype), err_msg=what)
        return
    np.testing.assert_allclose(arr.astype(np.float64), want.astype(np.float64), equal_nan=True,
                               err_msg=what, **TOLERANCE[type_name])


def c_cast(x: Any, type_name: str) -> np.ndarray:
    """C's conversion to the type: floats round to float32, integers truncate and wrap."""
    x = np.asarray(x, dtype=np.float64)
    if type_name in FLOATS:
        return x.astype(NP[type_name])
    return np.trunc(x).astype(np.int64).astype(NP[type_name])


def check_forms(name: str, args: list[Any], want: np.ndarray, type_name: str, src_optional: bool = True) -> None:
    """torch.name(args...) (new), torch.name(r, args...) and r:name(args...) (r a strided view,
    written in place), and src:name(rest...) in place, all against want."""
    first = next(a for a in args if isinstance(a, np.ndarray))
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expect(call(name, *args), want, type_name, f"torch.{name}(...) [new]")
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=f"torch.{name} changed an operand")
    for form in ("function", "method"):
        base = np.full((2,) + want.shape[::-1], 77, dtype=NP[type_name])
        r = base[0].T  # the result's shape, not contiguous (for 2+ dims)
        got = (call if form == "function" else method)(name, r, *args)
        assert np.shares_memory(luabridge.to_numpy(got), r) or r.size == 0, f"{name}: result not written in place"
        expect(r, want, type_name, f"{name} [{form} into a given result]")
        assert (base[1] == 77).all(), f"{name} wrote outside its result"
    if src_optional and args[0] is first:
        x = np.zeros(first.shape[::-1], first.dtype).T  # a strided copy of the source
        x[...] = first
        method(name, x, *args[1:])
        expect(x, want, type_name, f"x:{name}(...) [in place]")


def require_error_without(python_module: str, lua_module: str) -> str:
    """What `require(lua_module)` prints as its error in a fresh process where python_module
    cannot be imported (an optional extra that is not installed)."""
    code = (f"import sys; sys.modules[{python_module!r}] = None\n"
            "import luabridge\n"
            f"try:\n    luabridge.require({lua_module!r})\nexcept luabridge.LuaError as e:\n    print(e)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout


def lbfgs_direction(g: np.ndarray, g_old: Any, d: Any, t: Any, first: bool, s_list: list, y_list: list,
                    hdiag: float, n_corr: int) -> tuple[np.ndarray, float]:
    """torch7's lbfgs search direction: steepest descent first, then the two-loop recursion over
    the last n_corr (s, y) pairs, kept in s_list / y_list (updated here). Returns (d, hdiag)."""
    if first:
        return -g, hdiag
    y, s = g - g_old, d * t
    if y @ s > 1e-10:
        if len(s_list) == n_corr:
            s_list.pop(0), y_list.pop(0)
        s_list.append(s), y_list.append(y)
        hdiag = (y @ s) / (y @ y)
    q, al = -g, [0.0] * len(s_list)
    for i in reversed(range(len(s_list))):
        al[i] = (s_list[i] @ q) / (y_list[i] @ s_list[i])
        q = q - al[i] * y_list[i]
    d = q * hdiag
    for i in range(len(s_list)):
        d = d + (al[i] - (y_list[i] @ d) / (y_list[i] @ s_list[i])) * s_list[i]
    return d, hdiag


def with_rosenbrock(code: str) -> str:
    """The Lua function expression `code`, seeing rosenbrock_fg(x): f and a fresh gradient of
    sum of 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2, the function optim's own tests minimise."""
    return "(function(rosenbrock_fg) return " + code + " end)(" + _ROSENBROCK_FG + ")"


_ROSENBROCK_FG = """function(x)
  local n = x:size(1)
  local head, tail = x:narrow(1, 1, n - 1), x:narrow(1, 2, n - 1)
  local r = tail - torch.cmul(head, head)
  local f = 100 * r:dot(r) + (1 - head):dot(1 - head)
  local g = torch.zeros(n)
  g:narrow(1, 1, n - 1):add(-400, torch.cmul(head, r)):add(-2, 1 - head)
  g:narrow(1, 2, n - 1):add(200, r)
  return f, g
end"""


def cupy_device() -> tuple[Any, str]:
    """(the cupy module, "CuPy <version> on <device>") when CuPy is installed and sees a CUDA device,
    else (None, why not)."""
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except ImportError:
        return None, "CuPy is not installed"
    except Exception as e:   # CuPy raises its own runtime error without a driver
        return None, f"CuPy finds no CUDA device ({type(e).__name__}: {e})".splitlines()[0]
    if count == 0:
        return None, "CuPy finds no CUDA device"
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return cupy, f"CuPy {cupy.__version__} on {name.decode() if isinstance(name, bytes) else name}"


def cupy_or_skip() -> Any:
    """The cupy module when it is installed and sees a CUDA device; else the test skips, saying why."""
    cupy, why = cupy_device()
    if cupy is None:
        pytest.skip(f"{why}: the device tests need CuPy and a CUDA GPU")
    return cupy
