"""Elementwise fusion (Session("cpu fusion"), luabridge/graph/passes/fuse.py) on 8-op chains.

    python bench/fusion.py [--quick] [--sizes 1e4,1e6,1e7] [--compile]

Three float32 chains of 8 ops over two inputs x, y (graph variables, so a run is the graph's
compute alone, no feed or fetch copies): "cheap" (mul, add, sub, relu, sqrt, mul, add, div: memory
bound), "transcendental" (mul, exp, tanh, add, log, neg, exp, add: numpy's SIMD libm beats
scalar LuaJIT math) and "mixed" (4 of each). Each at every size through the executor unfused
("cpu": one numpy SIMD loop per op), fused ("cpu fusion": the group's form as the pass chose it,
"loop" or "blocked"), numpy (the same 8 ufunc calls, out= into preallocated arrays), PyTorch eager
(out= into one preallocated tensor) and, with --compile, torch.compile (its first compile took
about 100 s on the 2-core machine of docs/performance.md's table, so it is opt-in), at the default
thread count and at 1 thread (torch.set_num_threads; numpy and the executor are single-threaded).
Figures are the best of several runs, in ms; ratio columns are unfused / fused and x / fused
(above 1: fused is faster).
"""
from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import numpy as np

import luabridge.tinyflow as tf
from luabridge.graph import Session
from luabridge.core.runtime import bridge
from machine import cpu_name, vector_extension

TARGETS = {"cheap_speedup_from_1e6": 2.0, "fused_vs_unfused_min": 1.0}


def cheap(x: Any, y: Any, ops: Any) -> Any:
    t = ops.mul(x, 1.5)
    t = ops.add(t, y)
    t = ops.sub(t, 0.25)
    t = ops.relu(t)
    t = ops.sqrt(t)
    t = ops.mul(t, y)
    t = ops.add(t, 1.0)
    return ops.div(t, y)


def transcendental(x: Any, y: Any, ops: Any) -> Any:
    t = ops.mul(x, 0.5)
    t = ops.exp(t)
    t = ops.tanh(t)
    t = ops.add(t, y)
    t = ops.log(t)
    t = ops.neg(t)
    t = ops.exp(t)
    return ops.add(t, 1.0)


def mixed(x: Any, y: Any, ops: Any) -> Any:
    t = ops.mul(x, y)
    t = ops.exp(t)
    t = ops.add(t, 1.0)
    t = ops.log(t)
    t = ops.sub(t, y)
    t = ops.tanh(t)
    t = ops.mul(t, 3.0)
    return ops.exp(t)


CHAINS = {"cheap": cheap, "transcendental": transcendental, "mixed": mixed}


class GraphOps:
    """The chain as graph ops (symbols)."""
    mul, add, div = staticmethod(lambda a, b: a * b), staticmethod(lambda a, b: a + b), staticmethod(lambda a, b: a / b)
    sub = staticmethod(lambda a, b: a - b)
    neg = staticmethod(lambda a: a * -1.0)
    exp, log, sqrt, tanh = tf.exp, tf.log, tf.sqrt, tf.tanh
    relu = staticmethod(lambda a: tf.nn.relu(a))


class NumpyOps:
    """numpy ufuncs writing into one preallocated array (the chain's value is always in `out`)."""

    def __init__(self, out: np.ndarray) -> None:
        self.out = out

    def __getattr__(self, name: str) -> Callable:
        out = self.out
        if name == "relu":
            return lambda a: np.maximum(a, 0, out=out)
        uf = {"mul": np.multiply, "add": np.add, "sub": np.subtract, "div": np.divide, "neg": np.negative,
              "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}[name]
        return lambda *a: uf(*a, out=out)


class TorchOps:
    """PyTorch eager, out= into one preallocated tensor."""

    def __init__(self, torch: Any, out: Any) -> None:
        self.torch, self.out = torch, out

    def __getattr__(self, name: str) -> Callable:
        t, out = self.torch, self.out
        if name == "relu":
            return lambda a: t.clamp(a, min=0, out=out)
        fn = {"mul": t.mul, "add": t.add, "sub": t.sub, "div": t.div, "neg": t.neg, "exp": t.exp,
              "log": t.log, "sqrt": t.sqrt, "tanh": t.tanh}[name]
        return lambda *a: fn(*a, out=out)


def best_ms(fn: Callable[[], Any], budget_s: float) -> float:
    fn()
    best, spent, runs = float("inf"), 0.0, 0
    while runs < 3 or (spent < budget_s and runs < 50):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent, runs = min(best, dt), spent + dt, runs + 1
    return best * 1e3


def graph_runner(chain: Callable, config: str, xv: np.ndarray, yv: np.ndarray) -> tuple[Callable, str]:
    """The executor's run function for the chain (variables in, no fetch copy), and the form
    the fusion pass chose ('' unfused)."""
    x, y = tf.Variable(name="fx"), tf.Variable(name="fy")
    z = chain(x, y, GraphOps)
    s = Session(config)
    s.assign("fx", xv)
    s.assign("fy", yv)
    s.run(z)
    plan = s.executor_for(z).plan
    forms = sorted({n.attrs["form"] for n in plan.graph.nodes if n.op is not None and n.op.name == "_fused"})
    b = bridge()
    return (lambda: b.call(plan.run)), ",".join(forms)


def torch_runners(chain: Callable, xv: np.ndarray, yv: np.ndarray, use_compile: bool) -> tuple[Callable, Any, str]:
    try:
        import torch
    except ImportError:
        return None, None, "PyTorch is not installed"
    xt, yt = torch.from_numpy(xv), torch.from_numpy(yv)
    out = torch.empty_like(xt)
    eager = lambda: chain(xt, yt, TorchOps(torch, out))  # noqa: E731
    if not use_compile:
        return eager, None, "torch.compile not run (--compile runs it)"
    try:
        compiled = torch.compile(lambda a, b: chain(a, b, torch_functional(torch)))
        t0 = time.perf_counter()
        compiled(xt, yt)
        note = f"torch.compile compiled in {time.perf_counter() - t0:.1f} s"
        return eager, (lambda: compiled(xt, yt)), note
    except Exception as e:  # noqa: BLE001 - any failure of the compiler stack is reported
        return eager, None, f"torch.compile failed here: {type(e).__name__}: {str(e).splitlines()[0][:120]}"


def torch_functional(torch: Any) -> Any:
    class Ops:
        mul, add, sub, div = staticmethod(torch.mul), staticmethod(torch.add), staticmethod(torch.sub), staticmethod(torch.div)
        neg, exp, log, sqrt, tanh = (staticmethod(f) for f in (torch.neg, torch.exp, torch.log, torch.sqrt, torch.tanh))
        relu = staticmethod(torch.relu)
    return Ops


def set_threads(n: int) -> None:
    try:
        import torch
        torch.set_num_threads(n)
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="sizes 1e4 and 1e6, short timing budgets")
    p.add_argument("--sizes", default="1e4,1e6,1e7")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (slow to compile)")
    args = p.parse_args(argv)
    sizes = [int(float(s)) for s in ("1e4,1e6" if args.quick else args.sizes).split(",")]
    budget = 0.2 if args.quick else 1.0
    try:
        import torch
        default_threads = torch.get_num_threads()
    except ImportError:
        default_threads = 1
    print(f"CPU: {cpu_name()} ({vector_extension() or 'no vector extension found'}); float32; ms per run")
    rng = np.random.default_rng(0)
    notes: set[str] = set()
    worst, cheap_speedups = float("inf"), []
    header = (f"{'chain':15} {'n':>9} {'thr':>3} {'unfused':>9} {'fused':>9} {'form':>8} {'numpy':>9} "
              f"{'torch':>9} {'compile':>9} | {'unf/fus':>7} {'np/fus':>7} {'tch/fus':>7} {'cmp/fus':>7}")
    print(header)
    for name, chain in CHAINS.items():
        for n in sizes:
            xv = (rng.random(n) + 0.5).astype(np.float32)
            yv = (rng.random(n) + 0.5).astype(np.float32)
            unfused, _ = graph_runner(chain, "cpu", xv, yv)
            fused, form = graph_runner(chain, "cpu fusion", xv, yv)
            out = np.empty_like(xv)
            eager, compiled, note = torch_runners(chain, xv, yv, args.compile)
            notes.add(note)
            t_unf, t_fus = best_ms(unfused, budget), best_ms(fused, budget)
            t_np = best_ms(lambda: chain(xv, yv, NumpyOps(out)), budget)
            worst = min(worst, t_unf / t_fus)
            if name == "cheap" and n >= 10 ** 6:
                cheap_speedups.append(t_unf / t_fus)
            for threads in sorted({default_threads, 1}, reverse=True):
                set_threads(threads)
                t_tch = best_ms(eager, budget) if eager else float("nan")
                t_cmp = best_ms(compiled, budget) if compiled else float("nan")
                print(f"{name:15} {n:>9.0e} {threads:>3} {t_unf:>9.3f} {t_fus:>9.3f} {form:>8} {t_np:>9.3f} "
                      f"{t_tch:>9.3f} {t_cmp:>9.3f} | {t_unf / t_fus:>7.2f} {t_np / t_fus:>7.2f} "
                      f"{t_tch / t_fus:>7.2f} {t_cmp / t_fus:>7.2f}")
            set_threads(default_threads)
    for note in sorted(notes):
        print(note)
    print(f"cheap chain, fused vs unfused from 1e6 up: {min(cheap_speedups, default=float('nan')):.2f}x at least "
          f"(target {TARGETS['cheap_speedup_from_1e6']}x); every chain: {worst:.2f}x at least "
          f"(target {TARGETS['fused_vs_unfused_min']}x)")


if __name__ == "__main__":
    main()
