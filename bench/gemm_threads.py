"""How many threads a GEMM should get: 1 or 2, float32 and float64, idle and beside a CPU-bound process.

    python bench/gemm_threads.py [--seconds S] [--repeats R] [--dtypes float,double]
                                 [--classes model,cube,batch 64] [--no-contended] [--timeout LOG2_TICKS]

Times the op table's gemm (backend.cpu.gemm, as products run: float32 on one thread through
oneDNN's matmul, else OpenBLAS through the FFI) at the forward and backward GEMM shapes of the
models bench/real_models.py times (LeNet, the char-rnn LSTM, the MLP) and at two sweeps from
0.25M to 16M multiply-adds, at 1 and at 2 threads (the per-call rule switched off), first alone,
then with a CPU-bound process beside it (started and stopped here). Each figure is the mean time
per call over about S seconds (stalls included), the minimum of R such runs (1 and 2 threads
alternating, as the machine may be shared). t2/t1 below 1: two threads pay. The rule in
lua/torch/backend/cpu/blas.lua gives a call one more thread per blas.minWork.gemm multiply-adds
while /proc/loadavg shows CPUs free (on a machine shared with other work it sees that work too);
the last lines say from which size 2 threads pay, per condition, dtype and shape class. On a
machine busy with other sessions, run it as their better (`bash -c 'echo -20 >
/proc/self/autogroup; exec python bench/gemm_threads.py'` as root) so that "idle" means the
bench and its hog alone. Also prints the GEMM peak at 1 and 2 threads and the CPU time OpenBLAS's
idle workers burn after a 2-thread call (--timeout sets OPENBLAS_THREAD_TIMEOUT: 28 is OpenBLAS's
default).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

# (class, what, m, n, k, ta, tb): r (m x n) = op(a) . op(b), op(a) m x k, op(b) k x n; ta/tb: that
# operand is stored transposed (Linear's forward reads its weight transposed, its gradWeight the
# gradOutput). Forward and backward products of the models bench/real_models.py times, then two
# sweeps from 0.25M to 16M multiply-adds: cubes, a batch of 64 against N x N, and products whose
# first operand is stored transposed (cubes, and Linear's gradWeight, 512 x 128 over a batch).
SIZES = [
    ("model", "LeNet conv1 forward, 1 image", 20, 576, 25, False, False),
    ("model", "LeNet conv2 forward, 1 image", 50, 64, 500, False, False),
    ("model", "LeNet conv2 gradInput, 1 image", 500, 64, 50, True, False),
    ("model", "LeNet conv2 gradWeight, 1 image", 50, 500, 64, False, True),
    ("model", "LeNet conv2 forward, 4 images", 50, 256, 500, False, False),
    ("model", "LeNet fc 500 -> 10, batch 64", 64, 10, 500, False, True),
    ("model", "LeNet fc 800 -> 500, batch 64", 64, 500, 800, False, True),
    ("model", "LeNet fc 800 -> 500 gradInput, batch 64", 64, 800, 500, False, False),
    ("model", "LeNet fc 800 -> 500 gradWeight, batch 64", 500, 800, 64, True, False),
    ("model", "LSTM i2h 65 -> 512, batch 32", 32, 512, 65, False, True),
    ("model", "LSTM h2h 128 -> 512, batch 32", 32, 512, 128, False, True),
    ("model", "LSTM h2h gradInput, batch 32", 32, 128, 512, False, False),
    ("model", "LSTM h2h gradWeight, batch 32", 512, 128, 32, True, False),
    ("model", "LSTM h2h 128 -> 512, batch 50", 50, 512, 128, False, True),
    ("model", "LSTM h2h gradInput, batch 50", 50, 128, 512, False, False),
    ("model", "LSTM h2h gradWeight, batch 50", 512, 128, 50, True, False),
    ("model", "MLP 784 -> 512, batch 64", 64, 512, 784, False, True),
    ("model", "MLP 784 -> 512 gradWeight, batch 64", 512, 784, 64, True, False),
    ("model", "MLP 784 -> 512, batch 256", 256, 512, 784, False, True),
    ("model", "ResNet-18 layer4 3x3, 1 image", 512, 49, 4608, False, False),
] + [("cube", f"{n}^3", n, n, n, False, False) for n in (64, 80, 101, 128, 160, 202, 256)] \
  + [("batch 64", f"64 x {n} x {n}", 64, n, n, False, True) for n in (64, 90, 128, 181, 256, 362, 512)] \
  + [("a'.b", f"{n}^3, a transposed", n, n, n, True, False) for n in (64, 80, 101, 128, 160, 202, 256)] \
  + [("a'.b", f"gradWeight 512 x 128, batch {k}", 512, 128, k, True, False) for k in (4, 8, 16, 32, 64, 128, 256)]

TIMING = """
local torch = require 'torch'
local backend = require 'torch.backend'
local blas = require 'torch.backend.cpu.blas'
-- seconds per call of r = op(a) . op(b) on `threads` threads (nil: as the rule chooses, up to 2)
return function(dtype, m, n, k, ta, tb, threads, seconds)
  local T = torch[dtype]
  local a = ta and T(k, m):fill(0.5):t() or T(m, k):fill(0.5)
  local b = tb and T(n, k):fill(0.5):t() or T(k, n):fill(0.5)
  local r = T(m, n)
  local gemm, rule = backend.cpu.gemm, blas.threadsFor
  if threads then blas.threadsFor = function() return threads end end
  torch.setnumthreads(threads or 2)
  gemm(r, 0, r, 1, a, b)
  local timer, calls = torch.Timer(), 0
  repeat
    for _ = 1, 8 do gemm(r, 0, r, 1, a, b) end
    calls = calls + 8
  until timer:time().real >= seconds
  local t = timer:time().real / calls
  blas.threadsFor = rule
  return t
end
"""


def hog() -> subprocess.Popen:
    """A CPU-bound process beside the benchmark."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def fmt(t: float) -> str:
    return f"{t * 1e6:.0f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"


def worker_spin(luabridge: object) -> float:
    """CPU seconds the process uses while its main thread sleeps 50 ms after a 2-thread GEMM."""
    product = luabridge.eval("""function()
      local torch = require 'torch'
      local blas = require 'torch.backend.cpu.blas'
      local a, rule = torch.FloatTensor(512, 512):fill(0.5), blas.threadsFor
      blas.threadsFor = function() return 2 end
      torch.mm(a, a)
      blas.threadsFor = rule
    end""")
    spent = []
    for _ in range(3):
        product()
        c0 = time.process_time()
        time.sleep(0.05)
        spent.append(time.process_time() - c0)
    return statistics.median(spent)


def crossover(rows: list, times: dict) -> str:
    """The smallest size of `rows` from which 2 threads are no slower at every larger one."""
    rows = sorted(rows, key=lambda s: s[2] * s[3] * s[4])
    pays = [times[s][1] <= times[s][0] for s in rows]
    first = next((i for i in range(len(rows)) if all(pays[i:])), None)
    if first is None:
        return "2 threads are slower at the largest size measured"
    s = rows[first]
    below = [r for r in rows[:first]]
    note = f" (largest where 1 thread wins: {below[-1][2] * below[-1][3] * below[-1][4] / 1e6:.2f} M, {below[-1][1]})" \
        if below else " (at every size measured)"
    return f"2 threads pay from {s[2] * s[3] * s[4] / 1e6:.2f} M multiply-adds ({s[1]}){note}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=0.1, help="time per measurement")
    parser.add_argument("--repeats", type=int, default=5,
                        help="measurements per figure, 1 and 2 threads alternating; the minimum is kept")
    parser.add_argument("--dtypes", default="float,double", help="float, double or both")
    parser.add_argument("--classes", help="only these shape classes (model, cube, batch 64, a'.b), comma-separated")
    parser.add_argument("--no-contended", action="store_true", help="skip the runs beside a CPU-bound process")
    parser.add_argument("--timeout", type=int, help="OPENBLAS_THREAD_TIMEOUT (log2 of clock ticks)")
    args = parser.parse_args()
    if args.timeout is not None:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(args.timeout)
    import luabridge
    from machine import cores, cpu_name, gemm_gflops

    luabridge.require("torch")
    timing = luabridge.execute(TIMING)
    saved = luabridge.eval("torch.getnumthreads()")
    min_work = luabridge.eval("require('torch.backend.cpu.blas').minWork")
    dtypes = [{"float": "FloatTensor", "double": "DoubleTensor"}[d.strip()] for d in args.dtypes.split(",")]
    sizes = [s for s in SIZES if not args.classes or s[0] in args.classes.split(",")]
    classes = list(dict.fromkeys(s[0] for s in sizes))

    def measure(dtype: str, s: tuple) -> tuple[float, ...]:
        """Seconds per call at 1 thread, 2 threads, and as the rule chooses: the best of the repeats."""
        best = [float("inf")] * 3
        for _ in range(args.repeats):
            for i, threads in enumerate((1, 2, None)):
                best[i] = min(best[i], timing(dtype, *s[2:], threads, args.seconds))
        return tuple(best)

    print(f"{cpu_name()}, {cores()} cores; load average {os.getloadavg()[0]:.2f}; "
          f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}; "
          f"best of {args.repeats} x {args.seconds} s")
    peak = luabridge.eval("""function(threads)
      local torch = require 'torch'
      local blas = require 'torch.backend.cpu.blas'
      local a, b, r = torch.FloatTensor(1024, 1024):fill(0.5), torch.FloatTensor(1024, 1024):fill(0.5), torch.FloatTensor()
      local fixed = function() return threads end
      return function()
        local rule = blas.threadsFor
        blas.threadsFor = fixed
        r:mm(a, b)
        blas.threadsFor = rule
      end
    end""")
    for threads in (1, 2):
        print(f"GEMM peak, float32 1024^3, {threads} thread(s): {gemm_gflops(peak(threads), 1024):.0f} GFLOP/s")
    print(f"CPU burnt by idle workers in the 50 ms after a 2-thread call: {worker_spin(luabridge) * 1e3:.1f} ms")

    conditions = [("idle", {d: {s: measure(d, s) for s in sizes} for d in dtypes})]
    if not args.no_contended:
        other = hog()
        try:
            time.sleep(0.2)
            conditions.append(("contended", {d: {s: measure(d, s) for s in sizes} for d in dtypes}))
        finally:
            other.terminate()
            other.wait()
    luabridge.execute(f"torch.setnumthreads({saved})")

    print("\nt1, t2: 1 and 2 threads (float32 on 1 thread: oneDNN's matmul from blas.dnnlGemmWork, as"
          " products run); rule: as blas.threadsFor chooses (setnumthreads(2)), against the faster of t1 and t2")
    for dtype in dtypes:
        print(f"\n{dtype}\n")
        head = " | ".join(f"{name} t1 | t2 | t2/t1 | rule" for name, _ in conditions)
        print(f"| GEMM (m x n x k) | multiply-adds | {head} |")
        print("|---|---|" + "---|" * (4 * len(conditions)))
        for s in sorted(sizes, key=lambda s: (classes.index(s[0]), s[2] * s[3] * s[4])):
            _, what, m, n, k, ta, tb = s
            cells = []
            for _, times in conditions:
                t1, t2, rule = times[dtype][s]
                cells += [fmt(t1), fmt(t2), f"{t2 / t1:.2f}", f"{rule / min(t1, t2):.2f}"]
            op = ("a'" if ta else "a") + "." + ("b'" if tb else "b")
            print(f"| {what} ({m}x{n}x{k}, {op}) | {m * n * k / 1e6:.2f} M | " + " | ".join(cells) + " |")
    print(f"\nthe rule now (blas.gemmLeast), on free CPUs only: 2 threads for Double from"
          f" {2 * min_work['gemmDouble'] / 1e6:g} M multiply-adds, for Float from {2 * min_work['gemm'] / 1e6:g} M,"
          f" from {2 * min_work['gemmShortK'] / 1e6:g} M where a'.b has k <= {min_work['shortK']:g}")
    for name, times in conditions:
        for dtype in dtypes:
            for cls in classes:
                rows = [s for s in sizes if s[0] == cls]
                print(f"{name}, {dtype}, {cls}: {crossover(rows, times[dtype])}")


if __name__ == "__main__":
    main()
