"""Real models, luabridge against PyTorch CPU eager in one process, float32, at 1 thread and at
the default thread count (every core).

    python bench/real_models.py [--quick] [--threads 1,2] [--only ROW[,ROW...]] [--no-contended]
                                [--priority]

The models (bench/real_models.lua builds ours the way their Torch7 projects did; the PyTorch
twins here copy our weights, so the outputs agree):
- ResNet-18 at 224x224 (fb.resnet.torch's models/resnet.lua): forward in evaluation at batch 1
  and 8, a training step at batch 8;
- szagoruyko/cifar.torch's vgg_bn_drop (32x32, batch norm, dropout): a training step at batch 64;
- Caffe's LeNet (conv 20, conv 50, fc 500, tanh) and the 784-512-512-10 MLP (bench/nn_models.py's):
  training steps at batch 64 and 256;
- karpathy/char-rnn's 2-layer LSTM built with nngraph (128 hidden, 50 steps, batch 32, 65 symbols,
  one clone of the step graph per time step): a training step (through time and back) and the
  forward in evaluation; its twin is the same cell in eager ops, and a table after the main one
  compares it with torch.nn.LSTM on the same weights (what a PyTorch user would pick);
- soumith/dcgan.torch's generator netG (full convolutions) forward at batch 64, in training mode as
  dcgan's main.lua and generate.lua run it.
A training step is: zero the gradients, forward, criterion, backward, SGD update; neither side
computes the gradient of the input batch. A PyTorch forward runs under torch.no_grad().

Threads: ours are set with torch.setnumthreads(n) in Lua, PyTorch's with torch.set_num_threads(n).
Each figure is the best per step over several repeats, after a warm-up. Columns: ours/PyTorch
(the time ratio: below 1 we are faster), Nt/1t (the time at N threads over the time at 1), GFLOP/s
(the model's floating-point work, counted by PyTorch's FlopCounterMode on the twin, over the time)
and the share of the machine's GEMM peak that is (the best of our float32 GEMM and PyTorch's at
that thread count, 2048x2048 products). The contended rows rerun the LeNet and ResNet-18 rows at the
default thread count while a CPU-bound process (a Python busy loop) runs beside them; growth is
the contended time over the idle one.
The serial table (issue 25): for each count above 1, the step's serial fraction (the share of its
one-thread work that ran on one thread) from thread CPU time (bench/machine.py serial_fraction:
the workers' CPU time is the wall time in parallel regions; threads that spin while waiting count
as working, so it is a lower bound: PyTorch's OpenMP workers spin and read near 0) and from the
wall times alone (Karp-Flatt), and the speed-up over one thread that Amdahl's law allows on 8 and
16 cores with the Karp-Flatt fraction, beside each side's CPU time per step (all threads, from the
same block: bench/machine.py thread_time); printed with --quick too, and for any count above 1
even without a 1-thread run (the Karp-Flatt columns then read -). On a machine shared with other work, --priority (as root)
runs the bench and its hog ahead of that work, so that "idle" means the bench alone.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np

import luabridge
import nn_models
from machine import amdahl_speedup, cores, cpu_name, gemm_gflops, karp_flatt, thread_time, vector_extension

ROOT = Path(__file__).resolve().parent
MODELS = ROOT / "real_models.lua"
LR = 0.01
VOCAB, HIDDEN, LAYERS, STEPS = 65, 128, 2, 50

LUA_HELPERS = r"""
local path, lr = ...
local models = dofile(path)
local helpers = { models = models }
function helpers.build(name, ...) return models[name](...):float() end
-- name -> module, for the annotated nodes of a gModule
function helpers.named(g)
  local found = {}
  for _, node in ipairs(g.forwardnodes) do
    local name = node.data.annotations.name
    if name then found[name] = node.data.module end
  end
  return found
end
function helpers.trainer(model, criterion, x, y)
  return models.trainer(model, nn[criterion]():float(), x, y, lr)
end
function helpers.forwarder(model, x, train)
  if train then model:training() else model:evaluate() end
  return function(reps) for _ = 1, reps do model:forward(x) end end
end
function helpers.lstmLoop(proto, layers, hidden, x, y, train)
  return models.lstmLoop(proto, layers, hidden, x, y, lr, train)
end
function helpers.product(n)
  local a, b = torch.FloatTensor(n, n):normal(), torch.FloatTensor(n, n):normal()
  local r = torch.FloatTensor(n, n)
  return function() r:mm(a, b) end
end
helpers.setThreads = torch.setnumthreads
-- whether BLAS calls count the CPUs other processes leave free (backend/cpu/blas.lua)
function helpers.watchLoad(on) require('torch.backend.cpu.blas').watchLoad = on end
return helpers
"""


_helpers: dict[int, Any] = {}  # id of the runtime -> its Lua helpers


def lua() -> Any:
    """The Lua helpers (built once per runtime)."""
    runtime = luabridge.runtime()
    if id(runtime) not in _helpers:
        luabridge.require("nn")
        _helpers[id(runtime)] = runtime.execute(LUA_HELPERS, str(MODELS), LR)
    return _helpers[id(runtime)]


# ---------------------------------------------------------------------------------------------
# The PyTorch twins

def torch_twin(name: str, **sizes: int) -> Any:
    """The PyTorch model of the same structure as bench/real_models.lua's `name`."""
    import torch
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, inp: int, out: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(inp, out, 3, stride, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(True),
                nn.Conv2d(out, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out))
            self.shortcut = nn.Identity() if inp == out else nn.Sequential(
                nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.shortcut(x))

    def resnet18(classes: int = 1000) -> Any:
        widths = [64, 64, 128, 128, 256, 256, 512, 512]
        blocks = [BasicBlock(w if i == 0 else widths[i - 1], w, 2 if i in (2, 4, 6) else 1)
                  for i, w in enumerate(widths)]
        return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                             nn.ReLU(True), nn.MaxPool2d(3, 2, 1), *blocks, nn.AvgPool2d(7, 1),
                             nn.Flatten(), nn.Linear(512, classes))

    def vgg(classes: int = 10) -> Any:
        layers: list = []
        plan = [(3, 64, .3), (64, 64, 0), "M", (64, 128, .4), (128, 128, 0), "M",
                (128, 256, .4), (256, 256, .4), (256, 256, 0), "M",
                (256, 512, .4), (512, 512, .4), (512, 512, 0), "M",
                (512, 512, .4), (512, 512, .4), (512, 512, 0), "M"]
        for step in plan:
            if step == "M":
                layers.append(nn.MaxPool2d(2, 2, ceil_mode=True))
                continue
            inp, out, dropout = step
            layers += [nn.Conv2d(inp, out, 3, 1, 1), nn.BatchNorm2d(out, eps=1e-3), nn.ReLU(True)]
            if dropout:
                layers.append(nn.Dropout(dropout))
        return nn.Sequential(*layers, nn.Flatten(), nn.Dropout(.5), nn.Linear(512, 512),
                             nn.BatchNorm1d(512), nn.ReLU(True), nn.Dropout(.5),
                             nn.Linear(512, classes))

    def lenet() -> Any:
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.Tanh(),
                             nn.Linear(500, 10), nn.LogSoftmax(1))

    def dcgan(nz: int = 100, ngf: int = 64) -> Any:
        layers: list = []
        widths = [ngf * 8, ngf * 4, ngf * 2, ngf]
        for i, w in enumerate(widths):
            layers += [nn.ConvTranspose2d(nz, w, 4, bias=False) if i == 0 else
                       nn.ConvTranspose2d(widths[i - 1], w, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(w), nn.ReLU(True)]
        return nn.Sequential(*layers, nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    class LSTM(nn.Module):
        """char-rnn's LSTM, one step per call of forward, the names of our annotated nodes."""

        def __init__(self, vocab: int, hidden: int, layers: int) -> None:
            super().__init__()
            self.vocab, self.hidden, self.layers = vocab, hidden, layers
            for layer in range(1, layers + 1):
                setattr(self, f"i2h_{layer}", nn.Linear(vocab if layer == 1 else hidden, 4 * hidden))
                setattr(self, f"h2h_{layer}", nn.Linear(hidden, 4 * hidden))
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, x: Any, state: list) -> tuple[list, Any]:
            x = torch.nn.functional.one_hot(x, self.vocab).float()
            new = []
            for layer in range(1, self.layers + 1):
                c, h = state[2 * layer - 2], state[2 * layer - 1]
                sums = getattr(self, f"i2h_{layer}")(x) + getattr(self, f"h2h_{layer}")(h)
                i, f, o, w = sums.view(-1, 4, self.hidden).unbind(1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(w)
                x = torch.sigmoid(o) * torch.tanh(c)
                new += [c, x]
            return new, torch.log_softmax(self.decoder(x), 1)

    builders = {"resnet18": resnet18, "vgg": vgg, "lenet": lenet, "dcgan": dcgan, "lstm": LSTM}
    return builders[name](**sizes)


LUA_ARGS = {  # bench/real_models.lua's positional arguments, from the twin's keyword ones
    "resnet18": ("classes",), "vgg": ("classes",), "lenet": (), "dcgan": ("nz", "ngf"),
    "lstm": ("vocab", "hidden", "layers"),
}


def lua_model(name: str, **sizes: int) -> Any:
    """Our model `name` (float), built by bench/real_models.lua."""
    args = [sizes.get(k) for k in LUA_ARGS[name]]  # None is nil: the default
    return lua().build(name, *args)


def parameter_pairs(ours: Any, twin: Any, name: str) -> list[tuple[Any, Any]]:
    """(our parameter, the twin's) pairs: in order, or by annotation name for the LSTM's gModule."""
    if name == "lstm":
        named = lua().named(ours)
        return [(getattr(named[key], field), getattr(mod, field))
                for field in ("weight", "bias") for key, mod in twin.named_children()]
    params = ours.parameters(ours)[0]
    return list(zip((params[i + 1] for i in range(len(params))), twin.parameters(), strict=True))


def copy_weights(ours: Any, twin: Any, name: str) -> None:
    """Copies our parameters into the twin (shapes checked)."""
    import torch

    with torch.no_grad():
        for src, dst in parameter_pairs(ours, twin, name):
            value = torch.from_numpy(np.array(luabridge.to_numpy(src)))
            if value.shape != dst.shape:
                raise ValueError(f"{name}: parameter of shape {tuple(value.shape)} for one of {tuple(dst.shape)}")
            dst.copy_(value)


# ---------------------------------------------------------------------------------------------
# The rows

@dataclass
class Row:
    key: str          # for --only
    label: str
    model: str        # bench/real_models.lua's name, or "mlp" (bench/nn_models.py's)
    batch: int
    mode: str         # "train", "eval" (a forward in evaluation) or "forward" (in training mode)


ROWS = [
    Row("resnet18-eval-1", "ResNet-18 224x224 forward (eval)", "resnet18", 1, "eval"),
    Row("resnet18-eval-8", "ResNet-18 224x224 forward (eval)", "resnet18", 8, "eval"),
    Row("resnet18-train-8", "ResNet-18 224x224 training step", "resnet18", 8, "train"),
    Row("vgg-train-64", "VGG (cifar.torch) 32x32 training step", "vgg", 64, "train"),
    Row("lenet-train-64", "Caffe LeNet training step", "lenet", 64, "train"),
    Row("lenet-train-256", "Caffe LeNet training step", "lenet", 256, "train"),
    Row("mlp-train-64", "MLP 784-512-512-10 training step", "mlp", 64, "train"),
    Row("mlp-train-256", "MLP 784-512-512-10 training step", "mlp", 256, "train"),
    Row("lstm-train-32", "char-rnn LSTM (nngraph) 50 steps, training", "lstm", 32, "train"),
    Row("lstm-eval-32", "char-rnn LSTM (nngraph) 50 steps, forward (eval)", "lstm", 32, "eval"),
    Row("dcgan-forward-64", "DCGAN generator forward", "dcgan", 64, "forward"),
]
CONTENDED = ["lenet-train-64", "lenet-train-256", "resnet18-eval-8", "resnet18-train-8"]
INPUTS = {"resnet18": (3, 224, 224), "vgg": (3, 32, 32), "lenet": (1, 28, 28), "dcgan": (100, 1, 1),
          "mlp": (784,)}
CLASSES = {"resnet18": 1000, "vgg": 10, "lenet": 10, "mlp": 10}
CRITERIA = {  # ours and PyTorch's
    "resnet18": ("CrossEntropyCriterion", "CrossEntropyLoss"),
    "vgg": ("CrossEntropyCriterion", "CrossEntropyLoss"),
    "lenet": ("ClassNLLCriterion", "NLLLoss"),
}


def row_data(row: Row, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The input batch and the 1-based targets of a row."""
    if row.model == "lstm":
        return (rng.integers(1, VOCAB + 1, (STEPS, row.batch)),
                rng.integers(1, VOCAB + 1, (STEPS, row.batch)))
    x = rng.standard_normal((row.batch, *INPUTS[row.model])).astype(np.float32)
    return x, rng.integers(1, CLASSES.get(row.model, 1) + 1, row.batch).astype(np.int64)


def pair(name: str, sizes: Optional[dict] = None) -> tuple[Any, Any]:
    """Our model `name` and its PyTorch twin with our weights (sizes: the builders' keyword
    arguments; the bench's LSTM sizes by default)."""
    if sizes is None:
        sizes = {"vocab": VOCAB, "hidden": HIDDEN, "layers": LAYERS} if name == "lstm" else {}
    ours, twin = lua_model(name, **sizes), torch_twin(name, **sizes)
    copy_weights(ours, twin, name)
    return ours, twin


def steps_pair(row: Row, x: np.ndarray, y: np.ndarray,
               models: Optional[tuple[Any, Any]] = None) -> tuple[Callable[[int], Any], Callable[[int], Any]]:
    """Our step function and PyTorch's for a row, each running `reps` steps per call, on
    `models` (ours, twin) or a fresh pair (the MLP's come from bench/nn_models.py, each with its
    own initial weights)."""
    if row.model == "mlp":
        return (nn_models.luabridge_step("mlp", x, y, False), nn_models.torch_step("mlp", x, y, False))
    import torch

    ours, twin = models or pair(row.model)
    lx, ly = luabridge.from_numpy(x), luabridge.from_numpy(y)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y - 1)
    if row.model == "lstm":   # the characters too are indices
        tx = torch.from_numpy(x - 1)
        return (lua().lstmLoop(ours, twin.layers, twin.hidden, lx, ly, row.mode == "train"),
                torch_lstm_steps(twin, tx, ty, row.mode == "train"))
    if row.mode == "train":
        lua_criterion, torch_criterion = CRITERIA[row.model]
        return (lua().trainer(ours, lua_criterion, lx, ly),
                nn_models.torch_train_steps(twin, getattr(torch.nn, torch_criterion)(), tx, ty, LR))
    twin.train(row.mode == "forward")
    return lua().forwarder(ours, lx, row.mode == "forward"), torch_forward_steps(twin, tx)


def torch_forward_steps(model: Any, x: Any) -> Callable[[int], Any]:
    import torch

    def steps(reps: int) -> None:
        with torch.no_grad():
            for _ in range(reps):
                model(x)
    return steps


def torch_lstm_run(model: Any, x: Any, y: Any) -> Any:
    """The summed per-step NLL losses of char-rnn's forward through time from a zero state."""
    import torch

    state = [torch.zeros(x.shape[1], model.hidden)] * (2 * model.layers)
    loss = 0
    for t in range(x.shape[0]):
        state, logp = model(x[t], state)
        loss = loss + torch.nn.functional.nll_loss(logp, y[t])
    return loss


def torch_lstm_steps(model: Any, x: Any, y: Any, train: bool) -> Callable[[int], Any]:
    import torch

    sgd = torch.optim.SGD(model.parameters(), lr=LR)

    def steps(reps: int) -> None:
        for _ in range(reps):
            if train:
                sgd.zero_grad()
                torch_lstm_run(model, x, y).backward()
                sgd.step()
            else:
                with torch.no_grad():
                    torch_lstm_run(model, x, y)
    return steps


def torch_nn_lstm(twin: Any) -> Any:
    """torch.nn.LSTM (what a PyTorch user would pick for the whole sequence) with the twin's
    weights, and its decoder: PyTorch orders the gates i, f, g, o where char-rnn (and the twin)
    order them i, f, o, g."""
    import torch

    hidden = twin.hidden
    lstm = torch.nn.LSTM(twin.vocab, hidden, twin.layers)
    decoder = torch.nn.Linear(hidden, twin.vocab)
    order = torch.cat([torch.arange(0, 2 * hidden), torch.arange(3 * hidden, 4 * hidden),
                       torch.arange(2 * hidden, 3 * hidden)])
    with torch.no_grad():
        for layer in range(1, twin.layers + 1):
            i2h, h2h = getattr(twin, f"i2h_{layer}"), getattr(twin, f"h2h_{layer}")
            getattr(lstm, f"weight_ih_l{layer - 1}").copy_(i2h.weight[order])
            getattr(lstm, f"weight_hh_l{layer - 1}").copy_(h2h.weight[order])
            getattr(lstm, f"bias_ih_l{layer - 1}").copy_(i2h.bias[order])
            getattr(lstm, f"bias_hh_l{layer - 1}").copy_(h2h.bias[order])
        decoder.load_state_dict(twin.decoder.state_dict())
    return torch.nn.ModuleDict({"lstm": lstm, "decoder": decoder})


def torch_nn_lstm_run(model: Any, x: Any, y: Any, vocab: int) -> Any:
    """The summed per-step NLL losses of the sequence from a zero state (as torch_lstm_run)."""
    import torch

    out, _ = model["lstm"](torch.nn.functional.one_hot(x, vocab).float())
    logp = torch.log_softmax(model["decoder"](out), 2)
    return torch.nn.functional.nll_loss(logp.reshape(-1, vocab), y.reshape(-1)) * x.shape[0]


def torch_nn_lstm_steps(model: Any, x: Any, y: Any, vocab: int, train: bool) -> Callable[[int], Any]:
    import torch

    sgd = torch.optim.SGD(model.parameters(), lr=LR)

    def steps(reps: int) -> None:
        for _ in range(reps):
            if train:
                sgd.zero_grad()
                torch_nn_lstm_run(model, x, y, vocab).backward()
                sgd.step()
            else:
                with torch.no_grad():
                    torch_nn_lstm_run(model, x, y, vocab)
    return steps


def flops(step: Callable[[int], Any]) -> float:
    """The floating-point operations of one step, as PyTorch's FlopCounterMode counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step(1)
    return float(counter.get_total_flops())


@dataclass
class Timing:
    best: float                # seconds per step, the best repeat
    serial: Optional[float]    # the serial fraction from thread CPU time (machine.serial_fraction); None at 1 thread
    cpu: Optional[float] = None   # CPU seconds of all threads per step (machine.thread_time); None at 1 thread


def time_step(step: Callable[[int], Any], threads: int, quick: bool) -> Timing:
    """Best seconds per step: about 0.3 s (quick) or 1 s of steps per repeat; with several
    threads, one more block of at least a second measures the serial fraction."""
    t0 = time.perf_counter()
    step(1)
    once = time.perf_counter() - t0
    reps = max(1, int((0.3 if quick else 1.0) / max(once, 1e-6)))
    best = nn_models.best_time(step, reps, 2 if quick else 4, threads)
    if threads == 1:
        return Timing(best, None)
    serial, cpu = thread_time(step, max(reps, int(1.0 / max(best, 1e-6)) + 1), threads)
    return Timing(best, serial, cpu)


def set_threads(n: int) -> None:
    import torch

    lua().setThreads(n)
    torch.set_num_threads(n)


def take_priority() -> None:
    """Runs this process (and the hog it starts) ahead of the machine's other work: a session
    and so an autogroup of its own, at nice -20 (root only). The other work still shows in
    /proc/loadavg, so BLAS calls stop counting free CPUs from it (lua().watchLoad)."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    with open("/proc/self/autogroup", "w") as f:
        f.write("-20")
    lua().watchLoad(False)


@contextlib.contextmanager
def cpu_hog() -> Iterator[None]:
    """A CPU-bound process beside the bench while the block runs."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        hog.kill()
        hog.wait()


@dataclass
class Result:
    ours: Timing
    theirs: Timing
    flop: float
    reference: Optional[Timing] = None   # the LSTM rows: torch.nn.LSTM on the same weights


def measure(row: Row, threads: int, quick: bool, rng: np.random.Generator) -> Result:
    set_threads(threads)
    x, y = row_data(row, rng)
    if row.model != "lstm":
        ours, theirs = steps_pair(row, x, y)
        return Result(time_step(ours, threads, quick), time_step(theirs, threads, quick), flops(theirs))
    import torch

    models = pair("lstm")
    ours, theirs = steps_pair(row, x, y, models)
    reference = torch_nn_lstm_steps(torch_nn_lstm(models[1]), torch.from_numpy(x - 1), torch.from_numpy(y - 1),
                                    VOCAB, row.mode == "train")
    return Result(time_step(ours, threads, quick), time_step(theirs, threads, quick), flops(theirs),
                  time_step(reference, threads, quick))


def gemm_rates(threads: int) -> tuple[float, float]:
    """GFLOP/s of our float32 GEMM and PyTorch's at `threads` threads (2048x2048 products)."""
    import torch

    set_threads(threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    return gemm_gflops(lua().product(n), n, 3), gemm_gflops(lambda: torch.mm(a, b), n, 3)


def ms(seconds: float) -> str:
    return f"{1e3 * seconds:.2f}" if seconds < 1 else f"{1e3 * seconds:.0f}"


HEADER = ("| row | batch | threads | ours ms | PyTorch ms | ours/PyTorch | ours Nt/1t | PyTorch Nt/1t "
          "| GFLOP/s ours | GFLOP/s PyTorch | ours % of peak |\n|---|---|---|---|---|---|---|---|---|---|---|")

SERIAL_HEADER = ("| row | batch | threads | CPU ms ours | CPU ms PyTorch | serial ours | serial PyTorch "
                 "| Karp-Flatt ours | Karp-Flatt PyTorch | Amdahl 8 / 16 cores, ours | PyTorch |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|")


def table_rows(row: Row, results: dict[int, Result], peaks: dict[int, float]) -> Iterator[str]:
    """The table's lines of one row, a line per thread count (Nt/1t against the first count)."""
    counts = sorted(results)
    base = results[counts[0]]
    for n in counts:
        r = results[n]
        ours, theirs = r.ours.best, r.theirs.best
        scale = f"{ours / base.ours.best:.2f} | {theirs / base.theirs.best:.2f}" if n != counts[0] else "- | -"
        yield (f"| {row.label} | {row.batch} | {n} | {ms(ours)} | {ms(theirs)} | "
               f"{ours / theirs:.2f} | {scale} | {r.flop / ours / 1e9:.1f} | "
               f"{r.flop / theirs / 1e9:.1f} | {100 * r.flop / ours / 1e9 / peaks[n]:.0f}% |")


def serial_rows(row: Row, results: dict[int, Result]) -> Iterator[str]:
    """The serial fraction of each multi-thread count: from thread CPU time and (against the
    first count, when that is 1 thread) Karp-Flatt's from wall times; Amdahl's speed-up over one
    thread on 8 and 16 cores from Karp-Flatt's (clamped to 0..1), since spinning workers make
    the CPU-time figure a lower bound (PyTorch's OpenMP workers spin: its CPU-time fraction reads
    near 0 whatever the step does); from the CPU-time one only when no 1-thread run was made."""
    counts = sorted(results)
    base = results[counts[0]]
    for n in (k for k in counts if k > 1):
        r = results[n]
        if counts[0] == 1:
            flatt = [karp_flatt(b.best, t.best, n) for b, t in ((base.ours, r.ours), (base.theirs, r.theirs))]
            shown = " | ".join(f"{f:.2f}" for f in flatt)
            serial = [min(max(f, 0.0), 1.0) for f in flatt]
        else:
            shown, serial = "- | -", [r.ours.serial, r.theirs.serial]
        projected = [" / ".join(f"{amdahl_speedup(f, k):.1f}x" for k in (8, 16)) for f in serial]
        yield (f"| {row.label} | {row.batch} | {n} | {ms(r.ours.cpu)} | {ms(r.theirs.cpu)} | "
               f"{r.ours.serial:.2f} | {r.theirs.serial:.2f} | {shown} | "
               f"{projected[0]} | {projected[1]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter repeats")
    parser.add_argument("--threads", default=f"1,{cores()}",
                        help=f"comma-separated thread counts (default 1,{cores()})")
    parser.add_argument("--only", default="",
                        help="comma-separated rows or prefixes of rows (" + ", ".join(r.key for r in ROWS) + ")")
    parser.add_argument("--no-contended", action="store_true", help="skip the contended rows")
    parser.add_argument("--priority", action="store_true",
                        help="on a machine shared with other work, run ahead of it (root; see take_priority)")
    args = parser.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    rows = [r for r in ROWS if not wanted or any(r.key.startswith(w) for w in wanted)]
    if not rows:
        parser.error(f"--only {args.only}: no such row")
    counts = sorted({int(n) for n in args.threads.split(",")})
    import torch

    if args.priority:
        take_priority()
    print(f"{cpu_name()} ({vector_extension() or 'no vector extension found'}), {cores()} cores; "
          f"PyTorch {torch.__version__}; float32; best ms per step")
    rates = {n: gemm_rates(n) for n in counts}
    peaks = {n: max(rates[n]) for n in counts}
    print("float32 GEMM, 2048x2048, GFLOP/s ours / PyTorch's: "
          + ", ".join(f"{rates[n][0]:.0f} / {rates[n][1]:.0f} at {n} thread{'s' * (n > 1)}" for n in counts)
          + " (the peak: the better of the two)")
    rng = np.random.default_rng(0)
    print(HEADER)
    results = {}
    for row in rows:
        results[row.key] = {n: measure(row, n, args.quick, rng) for n in counts}
        print("\n".join(table_rows(row, results[row.key], peaks)), flush=True)
    referenced = [r for r in rows if results[r.key][counts[0]].reference]
    if referenced:
        print("\nthe LSTM rows against torch.nn.LSTM (the whole sequence in one call, same weights)")
        print("| row | batch | threads | ours ms | torch.nn.LSTM ms | ours/torch.nn.LSTM |\n|---|---|---|---|---|---|")
        for row in referenced:
            for n in counts:
                r = results[row.key][n]
                print(f"| {row.label} | {row.batch} | {n} | {ms(r.ours.best)} | {ms(r.reference.best)} | "
                      f"{r.ours.best / r.reference.best:.2f} |", flush=True)
    if counts[-1] > 1:
        print("\nserial fraction of a step (the share of its one-thread work that ran on one thread), from thread "
              "CPU time (a lower bound: waiting workers that spin count as working) and from wall times "
              "(Karp-Flatt), and the speed-up over one thread Amdahl's law allows with the Karp-Flatt fraction; "
              "CPU ms: all threads' CPU time per step in the block that measured the fraction")
        print(SERIAL_HEADER)
        for row in rows:
            print("\n".join(serial_rows(row, results[row.key])), flush=True)
    contended = [r for r in rows if r.key in CONTENDED]
    if args.no_contended or not contended:
        return
    n = counts[-1]
    print(f"\ncontended: a CPU-bound process beside the bench, {n} threads; growth = contended / idle")
    print("| row | batch | ours ms | growth | PyTorch ms | growth |")
    print("|---|---|---|---|---|---|")
    lua().watchLoad(True)   # the hog is real contention
    with cpu_hog():
        for row in contended:
            r, idle = measure(row, n, args.quick, rng), results[row.key][n]
            print(f"| {row.label} | {row.batch} | {ms(r.ours.best)} | {r.ours.best / idle.ours.best:.2f} | "
                  f"{ms(r.theirs.best)} | {r.theirs.best / idle.theirs.best:.2f} |", flush=True)


if __name__ == "__main__":
    main()
