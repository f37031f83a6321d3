"""Fuzzes Ctrl-C: each case runs a random Lua workload (allocation loops, randn, mm, torch.save
and torch.load of a file, serialize/deserialize, nn forward and backward, pure Lua loops,
callbacks into Python, and from Python: proxies' method calls, luabridge.load, Model.predict)
and sends SIGINT to the main thread after a random delay (or none).

    python tests/fuzz_interrupt.py --cases 100000 [--seed S] [--chunk N]
    python tests/fuzz_interrupt.py --seed S --case I          (one case, here, with its steps)

A case passes when it either completes with every step's value right (computed here with
numpy or a closed form) or raises KeyboardInterrupt (or a LuaError saying interrupted); then a
product checked against numpy must come out right, and every 50 cases the buffers Lua holds,
once its garbage is collected, must not have grown (an interrupted allocation leaks none).
Anything else (another LuaError such as "not enough memory", another exception, a wrong value)
fails, and so does a crash or hang (the runner of tests/fuzz_tensor.py: many cases per child
process, a case is a function of (seed, case number) and replays from them). Failures are
reported by kind: 'wrong', 'lua error', 'python', 'lost', 'state', 'leak', 'crash', 'hang'.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_tensor  # noqa: E402 - the runner, beside this file

RTOL = 1e-9


def _lua_alloc(rng: random.Random) -> tuple[str, float]:
    n, k = rng.randint(20, 400), rng.choice((3, 8, 10, 148, 1000))
    return (f"local s = 0 for i = 1, {n} do s = s + torch.DoubleTensor({k}):fill(i):sum() end return s",
            k * n * (n + 1) / 2)


def _lua_randn(rng: random.Random) -> tuple[str, float]:
    n, k = rng.randint(20, 400), rng.choice((1, 4, 10, 100))
    return f"local s = 0 for i = 1, {n} do s = s + torch.randn({k}):size(1) end return s", n * k


def _ranged(rows: int, cols: int, scale: int) -> tuple[str, np.ndarray]:
    """A Lua matrix of 1..rows*cols over scale, and numpy's."""
    return (f"torch.range(1, {rows * cols}):view({rows}, {cols}):div({scale})",
            np.arange(1, rows * cols + 1, dtype=np.float64).reshape(rows, cols) / scale)


def _lua_mm(rng: random.Random) -> tuple[str, float]:
    n, m, k, repeats = rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 30)
    a, a_np = _ranged(n, m, 7)
    b, b_np = _ranged(m, k, 5)
    return (f"local a, b, c = {a}, {b} for _ = 1, {repeats} do c = torch.mm(a, b) end return c:sum()",
            float((a_np @ b_np).sum()))


def _lua_save_load(rng: random.Random) -> tuple[str, float]:
    n, repeats = rng.randint(1, 3000), rng.randint(1, 20)
    return (f"torch.save(fuzz_path, {{torch.range(1, {n}), 'text'}}) local x "
            f"for _ = 1, {repeats} do x = torch.load(fuzz_path) end return x[1]:sum()", n * (n + 1) / 2)


def _lua_serialize(rng: random.Random) -> tuple[str, float]:
    n, repeats = rng.randint(1, 2000), rng.randint(1, 30)
    return (f"local x = {{torch.range(1, {n}), {{1, 2}}}} local y for _ = 1, {repeats} do "
            f"y = torch.deserialize(torch.serialize(x)) end return y[1]:sum() + y[2][2]", n * (n + 1) / 2 + 2)


def _lua_nn(rng: random.Random) -> tuple[str, float]:
    batch, inputs, outputs, repeats = rng.randint(1, 8), rng.randint(1, 30), rng.randint(1, 30), rng.randint(1, 20)
    w, w_np = _ranged(outputs, inputs, 10)
    x, x_np = _ranged(batch, inputs, 3)
    y = x_np @ w_np.T + 0.5
    grad_input = y @ w_np
    return (f"local m = nn.Sequential():add(nn.Linear({inputs}, {outputs})) m.modules[1].weight:copy({w}) "
            f"m.modules[1].bias:fill(0.5) local x, y, g = {x} for _ = 1, {repeats} do y = m:forward(x) "
            f"g = m:backward(x, y) end return y:sum() + g:sum()", float(y.sum() + grad_input.sum()))


def _lua_pure(rng: random.Random) -> tuple[str, float]:
    n = rng.randint(1, 3_000_000)
    return f"local x = 0 for i = 1, {n} do x = (x + 3 * i) % 1000003 end return x", float(3 * n * (n + 1) // 2 % 1000003)


def _lua_callbacks(rng: random.Random) -> tuple[str, float]:
    n = rng.randint(1, 3000)
    return f"local s = 0 for i = 1, {n} do s = s + fuzz_double(i) end return s", n * (n + 1)


LUA_STEPS = (_lua_alloc, _lua_randn, _lua_mm, _lua_save_load, _lua_serialize, _lua_nn, _lua_pure, _lua_callbacks)
# steps the child runs from Python, with their repeat count: the proxy's Linear is fixed there
PYTHON_STEPS = ("proxy", "load", "predict")


def make_case(seed: int, case: int) -> str:
    """A case as JSON: its steps (['lua', source, value] or [python step, repeats]) and the
    delay in seconds before SIGINT (null: none is sent)."""
    rng = random.Random(seed * 1_000_003 + case)
    steps: list[list[Any]] = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.2:
            steps.append([rng.choice(PYTHON_STEPS), rng.randint(1, 20)])
        else:
            source, value = rng.choice(LUA_STEPS)(rng)
            steps.append(["lua", source, value])
    delay = None if rng.random() < 0.1 else rng.choice((0.0, rng.uniform(0, 0.002), rng.uniform(0, 0.02)))
    return json.dumps({"steps": steps, "delay": delay})


CHILD = r"""
import atexit, json, os, resource, shutil, signal, sys, tempfile, threading, time
import numpy as np
records = os.fdopen(os.dup(1), 'w')
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
signal.signal(signal.SIGALRM, signal.SIG_DFL)
signal.signal(signal.SIGPROF, signal.SIG_DFL)
# Ctrl-C's own handler, also when this process was started with SIGINT ignored (nohup); it
# notes where it ran, for a signal whose KeyboardInterrupt never shows
import traceback
handled = []
def on_sigint(signum, frame):
    stack = traceback.extract_stack(frame, limit=6)
    handled.append(' < '.join(f'{os.path.basename(f.filename)}:{f.lineno} {f.name}' for f in reversed(stack)))
    raise KeyboardInterrupt
signal.signal(signal.SIGINT, on_sigint)
limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import luabridge
luabridge.require('nn')
bridge = sys.modules['luabridge.core.runtime'].bridge
main = threading.main_thread().ident
work = tempfile.mkdtemp(prefix='fuzz_interrupt')
atexit.register(shutil.rmtree, work, True)   # each child made one; 657 were left in /tmp
g = luabridge.runtime().globals()
g.fuzz_path = os.path.join(work, 'x.t7')
g.fuzz_double = lambda i: 2 * i
W = np.arange(12.0).reshape(3, 4) / 10
X = np.arange(8.0).reshape(2, 4) / 3
linear = luabridge.nn.Linear(4, 3)
linear.weight.copy(W)
linear.bias.fill(0.5)
model_path = os.path.join(work, 'm.t7')
luabridge.save(model_path, linear)
model = luabridge.Model.from_t7(model_path)
EXPECTED = X @ W.T + 0.5
A, B = np.arange(1.0, 13.0).reshape(3, 4) / 7, np.arange(1.0, 21.0).reshape(4, 5) / 5
mm = luabridge.wrap(luabridge.execute('return torch.mm'))

def python_step(kind, repeats):
    for _ in range(repeats):
        if kind == 'proxy':
            out = np.array(linear.forward(X))
        elif kind == 'load':
            out = np.array(luabridge.load(model_path).forward(X))
        else:
            out = np.asarray(model.predict(X))
    return float(out.sum()), float(EXPECTED.sum())

def run_steps(steps):
    # (step, got, expected) of the first step whose value is wrong, or None
    for step in steps:
        if step[0] == 'lua':
            got, expected = float(luabridge.execute(step[1])), step[2]
        else:
            got, expected = python_step(*step)
        if not np.isclose(got, expected, rtol=1e-9, atol=0):
            return step, got, expected

def live_buffers():
    luabridge.execute("for _ = 1, 3 do collectgarbage() end require('torch.core.memory').flush()")
    return len(bridge().buffers)

class Sender:
    # One thread for every case sends SIGINT to the main thread `delay` seconds after start(),
    # unless end() came first. A thread per case would die in a reference cycle, and the
    # collector's weakref callback for it (threading's WeakSet) may be where Python runs the
    # handler: an exception raised in such a callback is dropped, so that KeyboardInterrupt
    # would never show (CPython's rule, seen as 3 lost signals in 100,000 cases).
    def __init__(self):
        self.lock = threading.Lock()
        self.armed, self.ended, self.idle = threading.Event(), threading.Event(), threading.Event()
        self.idle.set()
        self.delay, self.sent = None, False
        threading.Thread(target=self.serve, daemon=True).start()
    def serve(self):
        while True:
            self.armed.wait()
            self.armed.clear()
            if not self.ended.wait(self.delay):
                with self.lock:
                    if not self.ended.is_set():
                        self.sent = True
                        signal.pthread_kill(main, signal.SIGINT)
            self.idle.set()
    def start(self, delay):
        self.idle.wait()   # the last case's turn is over: nothing of it can still be sent
        self.idle.clear()
        self.delay, self.sent = (delay if delay is not None else 1e9), False
        self.ended.clear()
        self.armed.set()
    def end(self):
        with self.lock:
            self.ended.set()

sender = Sender()

def run_case(spec):
    # 'ok' or the failure kind, and what happened
    handled.clear()
    outcome = None
    try:
        try:
            sender.start(spec['delay'])
            wrong = run_steps(spec['steps'])
            outcome = ('wrong', 'step %r gave %r, not %r' % wrong) if wrong else ('ok', 'completed')
        finally:
            sender.end()
        deadline = time.monotonic() + 30
        while sender.sent and time.monotonic() < deadline:   # a signal sent is delivered by now or soon
            time.sleep(0.0005)
        if sender.sent:
            where = handled[-1] if handled else 'nowhere'
            outcome = ('lost', f'SIGINT sent, no KeyboardInterrupt in 30 s; handler ran at: {where}; '
                               f'blocked: {signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])}, '
                               f'pending: {sorted(signal.sigpending())}')
    except KeyboardInterrupt:
        outcome = ('ok', 'interrupted')
    except luabridge.LuaError as e:
        message = str(e).split('\nstack traceback')[0]
        outcome = ('ok', 'interrupted') if 'interrupted' in message else ('lua error', message)
    except Exception as e:
        outcome = ('python', f'{type(e).__name__}: {e}')
    if outcome[0] == 'ok' and not np.allclose(np.array(mm(A, B)), A @ B, rtol=1e-12):
        outcome = ('state', 'torch.mm wrong after the case')
    return outcome

for kind in ('proxy', 'load', 'predict'):
    python_step(kind, 1)
baseline = None
for n, line in enumerate(sys.stdin):
    case, code = json.loads(line)
    print(json.dumps([case, 'start']), file=records, flush=True)
    signal.setitimer(signal.ITIMER_PROF, int(sys.argv[3]))
    signal.alarm(10 * int(sys.argv[3]))
    kind, message = run_case(json.loads(code))
    if kind == 'ok' and n % 50 == 49:
        live = live_buffers()
        baseline = baseline if baseline is not None else live
        if live > baseline + 16:
            kind, message = 'leak', f'{live} buffers held after collection, {baseline} before'
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.alarm(0)
    print(json.dumps([case, kind, message]), file=records, flush=True)
"""


if __name__ == "__main__":
    sys.exit(fuzz_tensor.main(make_case, "torch,nn", __doc__, CHILD))
