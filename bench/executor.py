"""The graph executor (luabridge.graph): per-node overhead, planned memory, and a LeNet training
step against the same model run through nn directly.

    python bench/executor.py [--quick] [--threads N]

(a) Per-node overhead: a chain of 200 elementwise ops (cycling v*0.5, v+x, exp(v), v*x) on
    4-element float32 tensors, run by Session.run, against the same chain written as eager
    PyTorch (CPU) and numpy statements in the same process (new result arrays, and out= into
    preallocated ones). A 1-node chain gives the fixed cost of one run; the per-node figure is
    (200-node time - 1-node time) / 199. "Lua run loop" times the executor's run function from a
    Lua loop, without Session.run's Python (feed and fetch copies).
(b) Planned memory of training-step graphs (forward, backward, SGD update; the tinyflow front
    end, batch 64): the executor's arenas against one buffer per entry (naive) and the liveness
    lower bound (the most bytes live at one step). Variables live in the session, not the plan.
(c) One LeNet-5 training step (28x28 inputs, SGD) through Session.run, with the layers as
    tinyflow ops and with the whole Lua model (examples/models/lenet.lua) as one lua_module
    node, against the same model, criterion and update run by nn directly (a Lua step function
    called once per step from Python: zero the gradients, forward, criterion, backward,
    params:add(-lr, grads)). All three start from the same weights; the bench checks that their
    first losses agree. The runs are interleaved; each figure is the best of several repeats.
    BLAS threads: --threads (default 1), as bench/nn_models.py.
ratio = the other figure / the executor's: above 1 the executor is faster (a, c); for (b) the
ratio is planned / lower bound.
"""
from __future__ import annotations

import argparse
import os
import time
import timeit
from typing import Any, Callable

import numpy as np

import luabridge
import luabridge.tinyflow as tf
from luabridge.graph import lua_module
from machine import cpu_name
from nn_models import LENET, limit_blas_threads

CHAIN_NODES = 200
TARGETS = {"node_us": 0.5, "memory": 1.1, "step": 1.05}

# ---- (a) per-node overhead -------------------------------------------------------------------

# One statement per op; x is the input, v the running value (it stays in (0, 1) for x in
# [0.1, 0.3]). {o} is the out= argument of the preallocated variants.
CHAIN_OPS = ("v = mul(v, 0.5{o})", "v = add(v, x{o})", "v = exp(v{o})", "v = mul(v, x{o})")


def chain_function(n: int, out: bool = False) -> Callable[..., Any]:
    """f(x, mul, add, exp[, outs]) running the first n chain ops as straight-line code (no
    per-op Python call but the op's own). With out=True op i writes into outs[i]."""
    body = [CHAIN_OPS[i % 4].format(o=f", out=outs[{i}]" if out else "") for i in range(n)]
    lines = ["def chain(x, mul, add, exp, outs=None):", "    v = x", *(f"    {s}" for s in body), "    return v"]
    src = "\n".join(lines) + "\n"
    scope: dict = {}
    exec(compile(src, f"<chain of {n}>", "exec"), scope)
    return scope["chain"]


def symbol_ops() -> tuple:
    """mul, add, exp building graph nodes (operators of symbols, as a tinyflow program writes)."""
    return (lambda a, b: a * b), (lambda a, b: a + b), tf.exp


def chain_input() -> np.ndarray:
    return np.array([0.1, 0.2, 0.3, 0.25], np.float32)


def chain_reference(n: int) -> np.ndarray:
    """The chain's value in float64 numpy (a check of what the bench runs)."""
    return chain_function(n)(chain_input().astype(np.float64), np.multiply, np.add, np.exp)


def best_per_call(fn: Callable[[], Any], reps: int, repeats: int) -> float:
    """Best seconds per call over `repeats` timings of `reps` calls, after a warm-up."""
    timer = timeit.Timer(fn)
    timer.timeit(max(1, reps // 10))
    return min(timer.timeit(reps) for _ in range(repeats)) / reps


def split(t1: float, tn: float, n: int) -> tuple[float, float]:
    """(fixed cost per run, cost per node) from the times of 1-node and n-node chains."""
    per_node = (tn - t1) / (n - 1)
    return t1 - per_node, per_node


def lua_run_loop(sess: Any, fetch: Any, x: Any, a: np.ndarray) -> Callable[[int], None]:
    """runs(k): the executor's Lua run function called k times from a Lua loop (its feed set
    once; no Session.run, so no Python per run but the placeholder's feed copy)."""
    sess.run(fetch, {x: a})
    ex = sess.executor_for(fetch)
    loop = luabridge.eval("function(run, k) for _ = 1, k do run() end end")

    def runs(k: int) -> None:
        ex._feeds = [a]          # what Executor.run sets for the duration of one run
        try:
            loop(ex.plan.run, k)
        finally:
            ex._feeds = []
    return runs


def executor_rows(n: int, reps: int, repeats: int) -> tuple[list[tuple], float]:
    """Rows (label, fixed s, per node s) for the executor, and its per-node cost via Session.run."""
    x = tf.placeholder(tf.float32)
    ops = symbol_ops()
    one, full = chain_function(1)(x, *ops), chain_function(n)(x, *ops)
    a = chain_input()
    sess = tf.Session()
    got = sess.run(full, {x: a})
    if not np.allclose(got, chain_reference(n), rtol=1e-4):
        raise AssertionError(f"the {n}-node chain computed {got}, numpy {chain_reference(n)}")
    t1 = best_per_call(lambda: sess.run(one, {x: a}), reps, repeats)
    tn = best_per_call(lambda: sess.run(full, {x: a}), reps, repeats)
    rows = [("luabridge executor, Session.run", *split(t1, tn, n))]
    loops = [lua_run_loop(sess, s, x, a) for s in (one, full)]
    l1, ln = (min(_timed(lambda: f(reps)) for _ in range(repeats)) / reps for f in loops)
    rows.append(("luabridge executor, Lua run loop alone", *split(l1, ln, n)))
    return rows, rows[0][2]


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def eager_rows(label: str, lib: Any, x: Any, empty: Callable[[], Any], n: int, reps: int,
               repeats: int) -> list[tuple]:
    """Rows for a library's eager ops (new results, then out= into preallocated results)."""
    ops = (lib.mul if hasattr(lib, "mul") else lib.multiply, lib.add, lib.exp)
    rows = []
    for out in (False, True):
        fs = [chain_function(k, out) for k in (1, n)]
        outs = [empty() for _ in range(n)] if out else None
        t1, tn = (best_per_call(lambda f=f: f(x, *ops, outs), reps, repeats) for f in fs)
        rows.append((f"{label}{', out= preallocated' if out else ''}", *split(t1, tn, n)))
    return rows


def per_node(quick: bool) -> tuple[list[str], list[str]]:
    """The table (a) and the targets missed."""
    n, repeats = CHAIN_NODES, 3 if quick else 7
    reps = 200 if quick else 1000
    rows, ours = executor_rows(n, reps, repeats)
    a = chain_input()
    rows += eager_rows("numpy", np, a, lambda: np.empty_like(a), n, reps, repeats)
    try:
        import torch
        t = torch.from_numpy(a.copy())
        rows += eager_rows(f"PyTorch {torch.__version__} eager (CPU)", torch, t, lambda: torch.empty_like(t),
                           n, reps, repeats)
    except ImportError:
        rows.append(("PyTorch eager (CPU): not installed, skipped", None, None))
    out = [f"| {CHAIN_NODES}-node chain, 4-element float32 | fixed per run | per node / op | ratio |",
           "|---|---|---|---|"]
    for label, fixed, node in rows:
        if node is None:
            out.append(f"| {label} | – | – | – |")
            continue
        out.append(f"| {label} | {fixed * 1e6:.2f} µs | {node * 1e6:.3f} µs | {node / ours:.1f} |")
    missed = [f"per-node overhead {ours * 1e6:.3f} µs (target {TARGETS['node_us']} µs)"] \
        if ours * 1e6 > TARGETS["node_us"] else []
    return out, missed


# ---- models: tinyflow graphs and the same layers in Lua ----------------------------------------

def tf_mlp(x: Any) -> Any:
    h = tf.nn.relu(tf.nn.linear(x, num_hidden=512, name="fc1", no_bias=False))
    h = tf.nn.relu(tf.nn.linear(h, num_hidden=512, name="fc2", no_bias=False))
    return tf.nn.linear(h, num_hidden=10, name="fc3", no_bias=False)


def tf_lenet(x: Any) -> Any:
    """examples/models/lenet.lua's layers (28x28 inputs) as tinyflow ops, without the final
    LogSoftMax (the criterion, softmax cross-entropy, includes it)."""
    h = x
    for i, filters in enumerate((6, 16), start=1):
        h = tf.nn.relu(tf.nn.conv2d(h, num_filter=filters, ksize=[1, 5, 5, 1], name=f"conv{i}", no_bias=False))
        h = tf.nn.max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    h = tf.nn.flatten_layer(h)
    h = tf.nn.relu(tf.nn.linear(h, num_hidden=120, name="fc1", no_bias=False))
    h = tf.nn.relu(tf.nn.linear(h, num_hidden=84, name="fc2", no_bias=False))
    return tf.nn.linear(h, num_hidden=10, name="fc3", no_bias=False)


MODELS = {"MLP 784-512-512-10": (tf_mlp, (784,), ["fc1", "fc2", "fc3"]),
          "LeNet-5": (tf_lenet, (1, 28, 28), ["conv1", "conv2", "fc1", "fc2", "fc3"])}
LR = 0.01


class TrainingGraph:
    """A tinyflow training step (loss, SGD update) of a model in its own session."""

    def __init__(self, model: str, batch: int) -> None:
        build, shape, self.layers = MODELS[model]
        self.x, self.label = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
        self.loss = tf.nn.mean_sparse_softmax_cross_entropy_with_logits(build(self.x), self.label)
        self.fetch = [self.loss, tf.train.GradientDescentOptimizer(LR).minimize(self.loss)]
        self.sess = tf.Session()
        self.shape = (batch, *shape)
        known = {self.x: list(self.shape), self.label: [batch]}
        self.sess.run([tf.assign(v, tf.normal(s, 0.05)) for v, _, s in tf.infer_variable_shapes(self.loss, known)])

    def set_weights(self, arrays: list[np.ndarray]) -> None:
        """Weights and biases in the Lua model's parameters() order."""
        names = [f"{layer}_{p}" for layer in self.layers for p in ("weight", "bias")]
        unknown = set(names) - set(self.loss.list_input_names())
        if unknown:
            raise ValueError(f"set_weights: the graph has no variables {sorted(unknown)}")
        for name, value in zip(names, arrays, strict=True):
            self.sess.assign(name, value)

    def step(self, images: np.ndarray, labels: np.ndarray) -> float:
        """One training step on 0-based labels; the loss before the update."""
        return float(self.sess.run(self.fetch, {self.x: images, self.label: labels})[0][0])

    def memory(self) -> Any:
        return self.sess.executor_for(self.fetch).plan.graph.attrs["memory"]

    def num_nodes(self) -> int:
        return sum(n.op is not None for n in self.sess.executor_for(self.fetch).plan.graph.nodes)


def batch_of(shape: tuple, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 images and 0-based float32 labels."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, shape[0]).astype(np.float32)


def memory(quick: bool) -> tuple[list[str], list[str]]:
    """The table (b) and the targets missed."""
    out = ["| training step, batch 64 | nodes | naive | planned | lower bound | planned / lower bound "
           "| naive / planned |", "|---|---|---|---|---|---|---|"]
    missed = []
    for model in MODELS:
        g = TrainingGraph(model, 64)
        g.step(*batch_of(g.shape))
        m = g.memory()
        ratio = m.planned_bytes / m.lower_bound_bytes
        out.append(f"| {model} | {g.num_nodes()} | {_mb(m.naive_bytes)} | {_mb(m.planned_bytes)} | "
                   f"{_mb(m.lower_bound_bytes)} | {ratio:.3f} | {m.naive_bytes / m.planned_bytes:.2f} |")
        if ratio > TARGETS["memory"]:
            missed.append(f"{model}: planned {ratio:.3f}x the lower bound (target {TARGETS['memory']}x)")
    return out, missed


def _mb(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


# ---- (c) LeNet step: executor against nn -----------------------------------------------------

# The Lua model (examples/models/lenet.lua), its parameters and a copy of it; a step function
# for it: () -> loss on the batch x and its 1-based labels y.
LUA_LENET = r"""
local lenetFile = ...
local model = dofile(lenetFile){ size = 28 }:float()
return model, model:parameters(), model:clone()
"""
LUA_STEP = r"""
local model, x, y, lr = ...
local criterion = nn.ClassNLLCriterion():float()
local params, grads = model:getParameters()
return function()
  grads:zero()
  local output = model:forward(x)
  local loss = criterion:forward(output, y)
  model:backward(x, criterion:backward(output, y))
  params:add(-lr, grads)
  return loss
end
"""


def lenet_steppers(batch: int) -> dict[str, Callable[[], float]]:
    """Three runners of the same LeNet training step from the same weights, by label."""
    luabridge.require("nn")
    rt = luabridge.runtime()
    images, labels = batch_of((batch, 1, 28, 28))
    model, params, copy = rt.execute(LUA_LENET, str(LENET))
    weights = [luabridge.to_numpy(params[i]).copy() for i in range(1, len(params) + 1)]

    layers = TrainingGraph("LeNet-5", batch)
    layers.set_weights(weights)

    x, target = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    loss = lua_module([lua_module(x, copy, name="lenet"), target], "nn.ClassNLLCriterion()", name="nll")
    one_node = [loss, tf.train.GradientDescentOptimizer(LR).minimize(loss)]
    sess = tf.Session()
    ones = labels + 1

    nn_step = rt.execute(LUA_STEP, model, luabridge.from_numpy(images),
                         luabridge.from_numpy(ones.astype(np.int64)), LR)
    feed = {x: images, target: ones}
    return {
        "executor, layers as tinyflow ops": lambda: layers.step(images, labels),
        "executor, lenet.lua as one lua_module node": lambda: float(sess.run(one_node, feed)[0][0]),
        "nn directly (Lua step)": lambda: float(nn_step()),
    }


def lenet_step(quick: bool) -> tuple[list[str], list[str]]:
    """The table (c) and the targets missed."""
    out = ["| LeNet-5 training step | batch | time per step | ratio (nn / this) |", "|---|---|---|---|"]
    missed, notes = [], []
    repeats, reps = (3, 10) if quick else (11, 20)
    for batch in ((64,) if quick else (64, 256)):
        steppers = lenet_steppers(batch)
        first = {label: step() for label, step in steppers.items()}
        spread = max(first.values()) - min(first.values())
        notes.append(f"batch {batch}: first losses {', '.join(f'{v:.6f}' for v in first.values())} "
                     f"(spread {spread:.1e})")
        if spread > 1e-4:
            raise AssertionError(f"the three LeNet steps disagree: {first}")
        best = {label: float("inf") for label in steppers}
        for _ in range(repeats):   # interleaved, so that machine noise hits all alike
            for label, step in steppers.items():
                step()
                best[label] = min(best[label], _timed(lambda: [step() for _ in range(reps)]) / reps)
        ref = best["nn directly (Lua step)"]
        for label, t in best.items():
            out.append(f"| {label} | {batch} | {t * 1e3:.3f} ms | {ref / t:.3f} |")
            if label.startswith("executor") and t / ref > TARGETS["step"]:
                missed.append(f"{label}, batch {batch}: {t / ref:.3f}x nn's time (target {TARGETS['step']}x)")
    return out + [""] + [f"- {n}" for n in notes], missed


# ---- main ------------------------------------------------------------------------------------

def header(threads: int) -> list[str]:
    jit = luabridge.eval("jit.version")
    try:
        import torch
        torch.set_num_threads(threads)
        torch_note = f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        torch_note = "PyTorch not installed: its rows are skipped"
    return [f"- machine: {cpu_name()}, {os.cpu_count()} cores; numpy {np.__version__}; {jit}; {torch_note}",
            f"- BLAS (numpy's OpenBLAS) threads: {threads}; best of several repeats"]


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and repeats")
    parser.add_argument("--threads", type=int, default=1, help="BLAS and PyTorch threads (default 1)")
    args = parser.parse_args(argv)
    threads = limit_blas_threads(args.threads)
    print("# luabridge graph executor\n")
    print("\n".join(header(threads)) + "\n")
    missed: list[str] = []
    for title, part in (("(a) per-node overhead (ratio: the other's per-op time / the executor's per node)", per_node),
                        ("(b) planned memory of training steps (intermediate entries; variables excluded)", memory),
                        ("(c) LeNet-5 training step, 28x28, SGD (ratio: nn's time / this one's)", lenet_step)):
        rows, miss = part(args.quick)
        print(f"## {title}\n\n" + "\n".join(rows) + "\n", flush=True)
        missed += miss
    targets = (f"<= {TARGETS['node_us']} µs per node, <= {TARGETS['memory']}x the memory lower bound, "
               f"<= {TARGETS['step']}x nn's LeNet step")
    print(f"Targets ({targets}): " + ("all met." if not missed else "missed:"))
    print("\n".join(f"- {m}" for m in missed))
    return missed


if __name__ == "__main__":
    main()
