"""Tensor op speed: luabridge, timed inside Lua, against numpy called from Python.

    python bench/tensor_ops.py [--quick] [--thresholds]

Each luabridge op runs in a loop compiled in Lua (one chunk per op, so each gets its own JIT
trace) and is timed there with clock_gettime(CLOCK_MONOTONIC) through the FFI; numpy runs the
same op from Python (timeit) into preallocated out= arrays that view the very same memory.
Every figure is the best of several repeats, per call. ratio = numpy time / luabridge time:
above 1 luabridge is faster. --thresholds measures, per op and type, the element count from
which numpy's SIMD loop beats the LuaJIT kernel (the table in lua/torch/backend/cpu/pointwise.lua).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import timeit
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

import luabridge
from machine import cpu_name

TIMER = r"""
local ffi = require 'ffi'
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } luabridge_bench_timespec;
int luabridge_bench_clock_gettime(int, luabridge_bench_timespec *) __asm__("clock_gettime");
]]
local ts = ffi.new('luabridge_bench_timespec')
return function()
  ffi.C.luabridge_bench_clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
"""

# A timing loop around one Lua statement over the locals r, a, b, c, d (per-op chunk: own trace).
LOOP = """
local now, r, a, b, c, d = ...
return function(reps)
  local t0 = now()
  for _ = 1, reps do {stmt} end
  return (now() - t0) / reps
end
"""


@dataclass
class Case:
    label: str
    lua: str                 # statement over r, a, b, c, d
    numpy: str               # statement over r, a, b, c, d (numpy views of the same memory)
    needs: str = ""          # a torch function that must exist, else the row is skipped


class Bench:
    def __init__(self, quick: bool) -> None:
        luabridge.require("torch")
        self.quick = quick
        self.repeats = 3 if quick else 5
        self.now = luabridge.execute(TIMER)
        self.compile = luabridge.eval(
            "function(src, ...) return assert(loadstring(src, '=bench'))(...) end")
        self.has = luabridge.eval("function(name) return torch[name] ~= nil end")

    def reps(self, work: float) -> int:
        """Repetitions for an op touching `work` elements: about 10-30 ms a repeat."""
        budget = 3e6 if self.quick else 2e7
        return max(3, int(budget / max(work, 1.0)))

    def time_lua(self, stmt: str, tensors: list[Any], reps: int) -> float:
        loop = self.compile(LOOP.replace("{stmt}", stmt), self.now, *tensors)
        loop(max(1, reps // 10))  # warm up: compile the trace
        return min(loop(reps) for _ in range(self.repeats))

    def time_numpy(self, stmt: str, arrays: list[np.ndarray], reps: int) -> float:
        names = dict(zip("rabcd", arrays), np=np)
        timer = timeit.Timer(stmt, globals=names)
        timer.timeit(max(1, reps // 10))
        return min(timer.timeit(reps) for _ in range(self.repeats)) / reps


def tensors(shape: tuple[int, ...], dtype: str) -> tuple[list[Any], list[np.ndarray]]:
    """r, a, b, c as Lua tensors and numpy views of their memory; a in [0.1, 0.9], b in [0.5, 1.5]."""
    rng = np.random.default_rng(0)
    arrays = [np.zeros(shape, dtype), rng.uniform(0.1, 0.9, shape).astype(dtype),
              rng.uniform(0.5, 1.5, shape).astype(dtype), rng.uniform(0.5, 1.5, shape).astype(dtype)]
    ts = [luabridge.from_numpy(x) for x in arrays]
    return ts, [luabridge.to_numpy(t) for t in ts]


def fmt_time(s: float) -> str:
    us = s * 1e6
    return f"{us:.3g} µs" if us < 1000 else f"{us / 1000:.3g} ms"


def row(bench: Bench, case: Case, size: str, ts: list[Any], arrays: list[np.ndarray],
        work: float) -> tuple[str, Optional[float]]:
    """A table row and its ratio (None when the op is not there)."""
    if case.needs and not bench.has(case.needs):
        return f"| {case.label} | {size} | – | – | – (torch.{case.needs} not there yet) |", None
    reps = bench.reps(work)
    lua = bench.time_lua(case.lua, ts, reps)
    ref = bench.time_numpy(case.numpy, arrays, reps)
    return f"| {case.label} | {size} | {fmt_time(lua)} | {fmt_time(ref)} | {ref / lua:.2f} |", ref / lua


ELEMENTWISE = [
    Case("relu (cmax 0)", "r:cmax(a, 0)", "np.maximum(a, 0, out=r)"),
    Case("add", "r:add(a, b)", "np.add(a, b, out=r)"),
    Case("mul (cmul)", "r:cmul(a, b)", "np.multiply(a, b, out=r)"),
    Case("exp", "r:exp(a)", "np.exp(a, out=r)"),
    Case("tanh", "r:tanh(a)", "np.tanh(a, out=r)"),
    Case("sum", "a:sum()", "np.add.reduce(a)", needs="sum"),
    Case("max", "a:max()", "np.maximum.reduce(a)", needs="max"),
]


# The targets for elementwise ops: ratio at least this at 1e3 and at 1e7 elements.
TARGETS = {10**3: 2.0, 10**7: 0.85}
ELEMENTWISE_OPS = ("relu (cmax 0)", "add", "mul (cmul)", "exp", "tanh")


def elementwise(bench: Bench) -> tuple[list[str], list[str]]:
    """The table rows, and the rows missing their target."""
    out, missed = [], []
    for dtype in ("float32", "float64"):
        for case in ELEMENTWISE:
            for n in (10**3, 10**5, 10**7):
                ts, arrays = tensors((n,), dtype)
                line, ratio = row(bench, dataclasses.replace(case, label=f"{case.label}, {dtype}"),
                                  f"{n:.0e}", ts, arrays, n)
                out.append(line)
                if case.label in ELEMENTWISE_OPS and n in TARGETS and ratio is not None and ratio < TARGETS[n]:
                    missed.append(f"{case.label}, {dtype} at {n:.0e}: {ratio:.2f} (target {TARGETS[n]})")
    return out, missed


def matrices(bench: Bench) -> list[str]:
    out = []
    rng = np.random.default_rng(0)
    for n in (64, 256, 1024):
        arrays = [np.zeros((n, n), np.float32), rng.standard_normal((n, n), np.float32),
                  rng.standard_normal((n, n), np.float32)]
        ts = [luabridge.from_numpy(x) for x in arrays]
        case = Case("GEMM r:mm(a, b), float32", "r:mm(a, b)", "np.matmul(a, b, out=r)", needs="mm")
        out.append(row(bench, case, f"{n}x{n}", ts, [luabridge.to_numpy(t) for t in ts], 2.0 * n**3 / 20)[0])
    # nn.Linear(784, 512) on a batch of 64, as nn computes it: output = input * weight^T, plus
    # ones (x) bias; numpy: matmul, then add the bias row
    arrays = [np.zeros((64, 512), np.float32), rng.standard_normal((64, 784), np.float32),
              rng.standard_normal((512, 784), np.float32).T, np.ones(64, np.float32),
              rng.standard_normal(512, np.float32)]
    ts = [luabridge.from_numpy(x) for x in arrays]
    case = Case("Linear 64x784 -> 512 (addmm + addr), float32", "r:addmm(0, r, 1, a, b); r:addr(1, c, d)",
                "np.matmul(a, b, out=r); np.add(r, d, out=r)", needs="addr")
    out.append(row(bench, case, "64x784", ts, [luabridge.to_numpy(t) for t in ts], 2.0 * 64 * 784 * 512 / 20)[0])
    return out


def call_cost(bench: Bench) -> list[str]:
    """One Python -> Lua call of a Lua function fetched once."""
    out = []
    t = luabridge.eval("torch.FloatTensor(4):zero()")
    for label, src, args in (("no-op closure f()", "function() end", ()),
                             ("closure f(t): t:add(1) on a 4-element tensor", "function(t) t:add(1) end", (t,))):
        f = luabridge.eval(src)
        reps = 20000 if bench.quick else 200000
        timer = timeit.Timer("f(*args)", globals={"f": f, "args": args})
        timer.timeit(1000)
        best = min(timer.timeit(reps) for _ in range(bench.repeats)) / reps
        out.append(f"| {label} | {fmt_time(best)} |")
    return out


def header() -> list[str]:
    cpu = cpu_name()
    jit = luabridge.eval("jit.version")
    return [
        f"- machine: {cpu}, {os.cpu_count()} cores; numpy {np.__version__}; {jit}",
        f"- OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}",
        "- best of several repeats, per call; ratio = numpy / luabridge (> 1: luabridge faster); numpy runs",
        "  from Python, so its small sizes measure mostly Python's call overhead (about 0.4 µs)",
    ]


# Threshold probes: the statement each numpy-threshold key of backend/cpu/pointwise.lua stands for.
PROBES = {
    "add": "r:add(a, 0.5)", "cadd": "r:add(a, b)", "csub": "r:csub(a, b)", "mul": "r:mul(a, 0.5)",
    "div": "r:div(a, 0.5)", "cmul": "r:cmul(a, b)", "cdiv": "r:cdiv(a, b)", "cmax": "r:cmax(a, 0.5)",
    "cmin": "r:cmin(a, 0.5)", "fmod": "r:fmod(a, 0.3)", "cfmod": "r:cfmod(a, b)",
    "pow": "r:pow(a, 1.7)", "tpow": "torch.pow(r, 1.7, a)", "cpow": "r:cpow(a, b)",
    "square": "r:pow(a, 2)", "atan2": "r:atan2(a, b)", "compare": "torch.lt(c, a, 0.5)",
}


def thresholds(bench: Bench, only: list[str]) -> list[str]:
    numpy_from = luabridge.eval("package.loaded['torch.backend.cpu.pointwise'].numpyFrom")
    keys = [k for k in sorted(numpy_from.keys()) if not only or k in only]
    sizes = [2**k for k in range(2, 12)]
    out = ["| op | Float from | Double from | kernel / loop at 1024 (Float) |", "|---|---|---|---|"]
    for key in keys:
        stmt = PROBES.get(key, f"r:{key}(a)")
        found = {}
        for dtype, name in (("float32", "Float"), ("float64", "Double")):
            keep = numpy_from[key][name]
            first, ratio = None, 0.0
            for n in sizes:
                ts, _ = tensors((n,), dtype)
                if key == "compare":
                    ts[3] = luabridge.eval(f"torch.ByteTensor({n})")
                reps = bench.reps(n * 8)
                numpy_from[key][name] = 1e18
                lua = bench.time_lua(stmt, ts, reps)
                numpy_from[key][name] = 0
                loop = bench.time_lua(stmt, ts, reps)
                if loop < lua and first is None:
                    first = n
                elif loop >= lua:
                    first = None
                ratio = lua / loop
            numpy_from[key][name] = keep
            found[name] = (first, ratio)
        cell = {k: (str(v[0]) if v[0] else "never") for k, v in found.items()}
        out.append(f"| {key} | {cell['Float']} | {cell['Double']} | {found['Float'][1]:.1f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and repeats")
    parser.add_argument("--thresholds", nargs="*", metavar="OP",
                        help="measure pointwise.lua's numpy thresholds (of the OPs given, or all)")
    args = parser.parse_args()
    bench = Bench(args.quick)
    print("# luabridge tensor ops vs numpy\n")
    print("\n".join(header()) + "\n")
    if args.thresholds is not None:
        print("\n".join(thresholds(bench, args.thresholds)))
        return
    print("| op | size | luabridge | numpy | ratio |")
    print("|---|---|---|---|---|")
    rows, missed = elementwise(bench)
    for line in rows + matrices(bench):
        print(line, flush=True)
    print("\n| Python -> Lua call | time per call |")
    print("|---|---|")
    print("\n".join(call_cost(bench)))
    targets = ", ".join(f">= {t}x at {n:.0e}" for n, t in TARGETS.items())
    print(f"\nElementwise targets ({targets}): " + ("all met." if not missed else "missed by"))
    print("\n".join(f"- {m}" for m in missed))


if __name__ == "__main__":
    main()
