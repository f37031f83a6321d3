"""The CUDA side of fusion (luabridge/backend/cuda_fuse.py): fused groups rendered to CuPy
ElementwiseKernel source.

Without a GPU the generated body is checked twice: compiled as C by gcc inside a loop over the
elements (CUDA's math names mapped onto <math.h>) and run with ctypes on numpy data against
numpy float64 references; and wrapped in a real ``__global__`` kernel, indexed the way CuPy's
elementwise loop is, compiled by nvcc to PTX. Each skips with the reason when its compiler is
absent. The callable of kernel(group) runs with numpy standing in for CuPy, and on a real device
(CuPy's ElementwiseKernel) where CuPy sees one.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import luabridge.graph as G
from luabridge.providers.torch_cuda import arrays as cuda
from luabridge.providers.torch_cuda import fuse as cuda_fuse
from luabridge.graph import Session
from luabridge.graph import fusion_ir
from luabridge.graph.fusion_ir import FusedGroup
from fuse_reference import FN_REFERENCE
from helpers import cupy_or_skip

X, Y, S = ("in", 0), ("in", 1), ("in", 2)


def C(v: float) -> tuple:
    return ("const", v)


POSITIVE = {"log", "sqrt", "rsqrt", "pow"}   # fns whose first operand the tests keep above 0


def reference(e: tuple, arrays: list) -> Any:
    if e[0] == "in":
        return arrays[e[1]].astype(np.float64)
    if e[0] == "const":
        return np.float64(e[1])
    return np.asarray(FN_REFERENCE[e[0]](*[reference(a, arrays) for a in e[1:]]), dtype=np.float64)


def _fn_expr(fn: str) -> tuple:
    """One use of fn on the group's inputs x (in 0) and y (in 1)."""
    if fn == "where":
        return ("where", ("gt", X, Y), X, ("neg", Y))
    if fn == "clamp":
        return ("clamp", X, C(-0.5), C(0.75))
    return (fn, X, Y) if fusion_ir.FNS[fn][0] == 2 else (fn, X)


def _uses(e: tuple, leaf: tuple) -> bool:
    return e == leaf or any(isinstance(a, tuple) and _uses(a, leaf) for a in e[1:])


CHAIN = ("neg", ("div", ("square", ("mul", ("sqrt", ("relu", ("sub", ("add", ("mul", X, C(1.5)), Y), C(0.25)))),
                                           S)), ("add", Y, C(3.0))))


def _groups() -> dict[str, FusedGroup]:
    """name -> group: every fn in both float dtypes, broadcast scalars, literals, a 10-op chain,
    two outputs sharing a subexpression, no input at all (ones_like + zeros_like fused)."""
    out = {}
    for dtype in ("float32", "float64"):
        for fn in sorted(fusion_ir.FNS):
            e = _fn_expr(fn)
            inputs = ("x", "y") if _uses(e, Y) else ("x",)
            out[f"{fn}-{dtype}"] = FusedGroup(inputs, (e,), dtype, "cuda", (fn,))
        out[f"scalar-{dtype}"] = FusedGroup(("x", "s"), (("sub", ("mul", X, Y), Y),), dtype, "cuda",
                                            ("mul", "sub"), frozenset({1}))
        out[f"chain-{dtype}"] = FusedGroup(("x", "y", "s"), (CHAIN,), dtype, "cuda",
                                            tuple(f"op{i}" for i in range(10)), frozenset({2}))
        out[f"literals-{dtype}"] = FusedGroup(("x", "y"), (("add", ("min", X, C(float("inf"))),
                                                                   ("mul", Y, C(-2.5e-3))),), dtype, "cuda", ("a",))
        shared = ("exp", ("sub", X, Y))
        out[f"two-outputs-{dtype}"] = FusedGroup(("x", "y"), (("mul", shared, X), ("add", shared, C(1.0))),
                                                 dtype, "cuda", ("e", "m", "a"))
        out[f"no-input-{dtype}"] = FusedGroup((), (("add", C(1.0), C(0.0)),), dtype, "cuda", ("ones", "zeros", "add"))
    return out


GROUPS = _groups()


def _inputs(name: str, g: FusedGroup, n: int = 257) -> list[np.ndarray]:
    rng = np.random.default_rng(len(name))
    fn = name.split("-")[0]
    arrays = []
    for k in range(len(g.inputs)):
        shape = (1,) if k in g.scalar_inputs else (n,)
        low = 0.25 if (fn in POSITIVE or fn == "chain") and k == 0 else -2.0
        arrays.append(rng.uniform(low, 2.0, shape).astype(g.dtype))
    return arrays


def _tolerance(dtype: str) -> dict:
    return dict(rtol=2e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)


def _check(name: str, g: FusedGroup, ins: list, outs: list) -> None:
    for e, out in zip(g.exprs, outs):
        np.testing.assert_allclose(out, reference(e, ins), **_tolerance(g.dtype), err_msg=name)


def _params(text: str) -> list[tuple[bool, str, str]]:
    """An ElementwiseKernel parameter list as (raw, C type, name)."""
    found = []
    for p in filter(None, text.split(", ")):
        *raw, dtype, name = p.split()
        found.append((bool(raw), cuda_fuse.C_TYPES[dtype], name))
    return found


def _loop(src: cuda_fuse.KernelSource, signature: str, index_loop: str) -> str:
    """The generated body inside a loop over the elements, as CuPy's ElementwiseKernel runs it:
    an elementwise input is a const local holding element i, an output a local stored to element
    i after the body, a raw input a pointer the body indexes."""
    ins, outs = _params(src.in_params), _params(src.out_params)
    args = [f"const {t}* {'' if raw else '_raw_'}{n}" for raw, t, n in ins] + [f"{t}* _raw_{n}" for _, t, n in outs]
    reads = [f"const {t} {n} = _raw_{n}[i];" for raw, t, n in ins if not raw]
    locals_ = [f"{t} {n};" for _, t, n in outs]
    writes = [f"_raw_{n}[i] = {n};" for _, _, n in outs]
    return (f"{signature} {src.name}(long long n, {', '.join(args)}) {{\n  {index_loop} {{\n    "
            + "\n    ".join(reads + locals_ + src.operation.splitlines() + writes) + "\n  }\n}\n")


# ---- (a) the body as C, run on numpy data ----

GCC_PRELUDE = "#include <math.h>\n#define rsqrtf(x) (1.0f / sqrtf(x))\n#define rsqrt(x) (1.0 / sqrt(x))\n"


@pytest.fixture(scope="module")
def c_library(tmp_path_factory) -> ctypes.CDLL:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the generated bodies cannot be compiled as C")
    where = tmp_path_factory.mktemp("cuda_fuse_c")
    text = GCC_PRELUDE + "".join(_loop(cuda_fuse.render(g), "void", "for (long long i = 0; i < n; i++)")
                                 for g in GROUPS.values())
    (where / "fused.c").write_text(text)
    subprocess.run([gcc, "-O2", "-std=c99", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(where / "fused.so"),
                    str(where / "fused.c"), "-lm"], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(where / "fused.so"))


def _run_c(lib: ctypes.CDLL, g: FusedGroup, ins: list) -> list[np.ndarray]:
    n = max((a.size for a in ins), default=257)
    outs = [np.full(n, np.nan, dtype=g.dtype) for _ in g.exprs]
    f = getattr(lib, cuda_fuse.render(g).name)
    f(ctypes.c_longlong(n), *[ctypes.c_void_p(a.ctypes.data) for a in ins + outs])
    return outs


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_the_body_compiled_as_c_matches_numpy(c_library, name: str) -> None:
    g = GROUPS[name]
    ins = _inputs(name, g)
    _check(name, g, ins, _run_c(c_library, g, ins))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_min_relu_clamp_propagate_nan_as_numpy_does(c_library, dtype: str) -> None:
    x = np.array([np.nan, 1.0, -1.0, np.nan, 0.5], dtype=dtype)
    y = np.array([0.0, np.nan, -2.0, np.nan, 0.25], dtype=dtype)
    for fn in ("max", "min", "relu", "clamp"):
        g = GROUPS[f"{fn}-{dtype}"]
        ins = [x, y][:len(g.inputs)]
        np.testing.assert_array_equal(_run_c(c_library, g, ins)[0], reference(g.exprs[0], ins), err_msg=fn)


def test_every_fn_of_the_vocabulary_has_a_rendering() -> None:
    assert set(cuda_fuse.FLOAT_TEMPLATES) == set(fusion_ir.FNS)


def test_constants_are_rounded_to_the_group_dtype_as_the_ir_casts_them() -> None:
    g = FusedGroup(("x",), (("add", X, C(1e300)),), "float32", "cuda", ("a",))
    assert "(1.0f / 0.0f)" in cuda_fuse.render(g).operation   # 1e300 overflows float32 to inf
    g = FusedGroup(("x",), (("mul", X, C(0.1)),), "float32", "cuda", ("m",))
    assert "x0 * 0.1f;" in cuda_fuse.render(g).operation   # the shortest text of float32(0.1)


def test_float32_uses_float_math_and_float_literals() -> None:
    f32, f64 = cuda_fuse.render(GROUPS["chain-float32"]), cuda_fuse.render(GROUPS["chain-float64"])
    assert "sqrtf(" in f32.operation and "1.5f" in f32.operation and "const float t" in f32.operation
    assert "sqrtf(" not in f64.operation and "sqrt(" in f64.operation and "1.5f" not in f64.operation
    assert "raw float32 x2" in f32.in_params and "raw float64 x2" in f64.in_params
    assert "x2[0]" in f32.operation   # the broadcast scalar read at index 0 for every element


def test_a_shared_subexpression_is_computed_once() -> None:
    op = cuda_fuse.render(GROUPS["two-outputs-float64"]).operation
    assert op.count("exp(") == 1 and op.count("x0 - x1") == 1
    assert op.splitlines()[-2:] == ["y0 = t2;", "y1 = t3;"]


def test_unknown_fn_and_dtype_are_refused_with_the_name() -> None:
    with pytest.raises(cuda_fuse.UnsupportedFusion, match="fn 'erf'"):
        cuda_fuse.render(FusedGroup(("x",), (("erf", X),), "float32", "cuda", ("e",)))
    with pytest.raises(cuda_fuse.UnsupportedFusion, match="dtype complex64"):
        cuda_fuse.render(FusedGroup(("x",), (("exp", X),), "complex64", "cuda", ("e",)))


def test_source_names_the_kernel_and_its_params() -> None:
    text = cuda_fuse.source(GROUPS["scalar-float32"])
    assert text.startswith("// luabridge_fused_")
    assert "// in:  float32 x0, raw float32 x1\n// out: float32 y0\n" in text
    assert text.endswith("y0 = t1;\n")


# ---- (b) the body inside a CUDA kernel, compiled by nvcc ----

def test_every_body_compiles_as_a_cuda_kernel(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed: the CUDA source cannot be compiled here")
    grid_loop = ("for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                 "i += (long long)blockDim.x * gridDim.x)")
    text = "".join(_loop(cuda_fuse.render(g), 'extern "C" __global__ void', grid_loop) for g in GROUPS.values())
    (tmp_path / "fused.cu").write_text(text)
    done = subprocess.run([nvcc, "--ptx", "-Werror", "all-warnings", "-o", str(tmp_path / "fused.ptx"),
                           str(tmp_path / "fused.cu")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "fused.ptx").read_text()
    assert all(f".entry {cuda_fuse.render(g).name}(" in ptx for g in GROUPS.values())


# ---- (c) the callable with numpy standing in for CuPy; (d) the cache ----

@pytest.mark.parametrize("name", sorted(GROUPS))
def test_kernel_with_numpy_standing_in_matches_numpy(numpy_device, name: str) -> None:
    g = GROUPS[name]
    ins = _inputs(name, g)
    outs = [np.empty(257, dtype=g.dtype) for _ in g.exprs]
    cuda_fuse.kernel(g, fusion_ir.evaluate)(*ins, *outs)
    _check(name, g, ins, outs)


def test_a_source_is_compiled_once(numpy_device) -> None:
    expr = ("mul", ("add", X, C(0.123456789)), Y)
    first = FusedGroup(("a", "b"), (expr,), "float32", "cuda", ("n1", "n2"))
    renamed = FusedGroup(("c", "d"), (expr,), "float32", "cuda", ("m1", "m2"))   # the same source
    before = cuda_fuse.compile_count
    k = cuda_fuse.kernel(first, fusion_ir.evaluate)
    assert cuda_fuse.compile_count == before + 1
    assert cuda_fuse.kernel(first, fusion_ir.evaluate) is k and cuda_fuse.kernel(renamed, fusion_ir.evaluate) is k
    assert cuda_fuse.compile_count == before + 1
    cuda_fuse.kernel(FusedGroup(("a", "b"), (expr,), "float64", "cuda", ("n1", "n2")), fusion_ir.evaluate)
    assert cuda_fuse.compile_count == before + 2


def test_gpu_fusion_session_runs_the_generated_kernel(numpy_device) -> None:
    """Session("gpu fusion") (numpy standing in): the chain is one group, run by kernel(group)."""
    x = G.create("placeholder", name="x", dtype="float32")
    b = G.create("placeholder", name="b", dtype="float32")
    y = G.create("sqrt", G.create("exp", x * 1.2346 + b) - 0.125)
    xv, bv = np.linspace(-1, 1, 7, dtype=np.float32), np.float32([0.25])
    s = Session("gpu fusion")
    before = cuda_fuse.compile_count
    for _ in range(2):   # the second run finds the kernel in the cache
        out = s.run(y, {x: xv, b: bv})
        np.testing.assert_allclose(out, np.sqrt(np.exp(xv * 1.2346 + 0.25) - 0.125), rtol=2e-6)
    (group,) = s.executor_for(y).plan.graph.attrs["fusion"]   # names count up across graphs
    assert [n.rstrip("0123456789") for n in group] == ["mul_scalar", "add_symbol", "exp", "sub_scalar", "sqrt"]
    assert cuda_fuse.compile_count == before + 1


# ---- (e) CuPy's ElementwiseKernel on a real device ----

def test_kernel_on_a_cuda_device() -> None:
    cupy = cupy_or_skip()
    cuda.use_array_module(cupy)
    try:
        for name, g in sorted(GROUPS.items()):
            ins = _inputs(name, g)
            outs = [cupy.empty(257, dtype=g.dtype) for _ in g.exprs]
            cuda_fuse.kernel(g, fusion_ir.evaluate)(*[cupy.asarray(a) for a in ins], *outs)
            _check(name, g, ins, [cupy.asnumpy(o) for o in outs])
    finally:
        cuda.use_array_module(None)
