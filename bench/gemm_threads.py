"""How many threads a float32 GEMM should get: 1 or 2, idle and beside a CPU-bound process.

    python bench/gemm_threads.py [--seconds S] [--timeout LOG2_TICKS]

Times the op table's gemm (backend.cpu.gemm, OpenBLAS through the FFI) at GEMM sizes of
convolutions and Linear layers, at 1 and at 2 threads (the per-call rule switched off), first
alone, then with a CPU-bound process beside it (started and stopped here). Each figure is the
mean time per call over about S seconds (stalls included), the median of three such runs.
t2/t1 below 1: two threads pay. The rule in lua/torch/backend/cpu/blas.lua gives a call one
more thread per blas.minWork.gemm multiply-adds while /proc/loadavg shows CPUs free (on a machine
shared with other work it sees that work too); the last lines say from which size 2 threads pay,
idle and contended. On a machine busy with other sessions, run it as their better
(`bash -c 'echo -20 > /proc/self/autogroup; exec python bench/gemm_threads.py'` as root) so that
"idle" means the bench and its hog alone. Also prints the GEMM peak at 1 and 2 threads and the CPU time OpenBLAS's idle workers
burn after a 2-thread call (--timeout sets OPENBLAS_THREAD_TIMEOUT: 28 is OpenBLAS's default).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SIZES = [  # (what, m, n, k): r (m x n) = a (m x k) . b (k x n)
    ("LeNet conv1 forward, 1 image", 20, 576, 25),
    ("64^3", 64, 64, 64),
    ("LSTM 128 hidden, batch 32", 32, 512, 256),
    ("LeNet conv2 forward, 1 image", 50, 64, 500),
    ("128^3", 128, 128, 128),
    ("LeNet conv2 forward, 4 images", 50, 256, 500),
    ("MLP 512 -> 512, batch 64", 64, 512, 512),
    ("LeNet fc 800 -> 500, batch 64", 64, 500, 800),
    ("256^3", 256, 256, 256),
    ("LeNet fc 800 -> 500, batch 256", 256, 500, 800),
    ("ResNet-18 layer1 3x3, 1 image", 64, 3136, 576),
    ("ResNet-18 layer4 3x3, 1 image", 512, 49, 4608),
    ("512^3", 512, 512, 512),
]

TIMING = """
local torch = require 'torch'
local backend = require 'torch.backend'
local blas = require 'torch.backend.cpu.blas'
-- seconds per call of r = a . b on `threads` threads (nil: as the rule chooses, up to 2)
return function(m, n, k, threads, seconds)
  local a, b = torch.FloatTensor(m, k):fill(0.5), torch.FloatTensor(k, n):fill(0.5)
  local r = torch.FloatTensor(m, n)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=0.2, help="time per measurement")
    parser.add_argument("--timeout", type=int, help="OPENBLAS_THREAD_TIMEOUT (log2 of clock ticks)")
    args = parser.parse_args()
    if args.timeout is not None:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(args.timeout)
    import luabridge
    from machine import cores, cpu_name, gemm_gflops

    luabridge.require("torch")
    timing = luabridge.execute(TIMING)
    saved = luabridge.eval("torch.getnumthreads()")
    min_work = luabridge.eval("require('torch.backend.cpu.blas').minWork.gemm")

    def measure(m: int, n: int, k: int) -> tuple[float, ...]:
        """Seconds per call at 1 thread, 2 threads, and as the rule chooses."""
        return tuple(statistics.median(timing(m, n, k, threads, args.seconds) for _ in range(3))
                     for threads in (1, 2, None))

    print(f"{cpu_name()}, {cores()} cores; load average {os.getloadavg()[0]:.2f}; "
          f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT')}")
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

    idle = {s: measure(*s[1:]) for s in SIZES}
    other = hog()
    try:
        time.sleep(0.2)
        busy = {s: measure(*s[1:]) for s in SIZES}
    finally:
        other.terminate()
        other.wait()
    luabridge.execute(f"torch.setnumthreads({saved})")

    print("\nt1, t2: 1 and 2 threads; rule: as blas.threadsFor chooses (setnumthreads(2)), against the"
          " faster of t1 and t2")
    print("| GEMM (m x n x k) | multiply-adds | idle t1 | t2 | t2/t1 | rule | contended t1 | t2 | t2/t1 | rule |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in SIZES:
        what, m, n, k = s
        cells = []
        for t1, t2, rule in (idle[s], busy[s]):
            cells += [fmt(t1), fmt(t2), f"{t2 / t1:.2f}", f"{rule / min(t1, t2):.2f}"]
        print(f"| {what} ({m}x{n}x{k}) | {m * n * k / 1e6:.1f} M | " + " | ".join(cells) + " |")
    # per condition, the smallest size from which 2 threads are no slower at every size above
    by_work = sorted(SIZES, key=lambda s: s[1] * s[2] * s[3])
    print(f"\nthe rule now: 2 threads from {2 * min_work / 1e6:.0f} M multiply-adds, on free CPUs only")
    for name, times in (("idle", idle), ("contended", busy)):
        pays = [times[s][1] <= times[s][0] for s in by_work]
        first = next((i for i in range(len(by_work)) if all(pays[i:])), None)
        if first is None:
            print(f"{name}: 2 threads are slower at the largest size measured")
        else:
            s = by_work[first]
            print(f"{name}: 2 threads pay from {s[1] * s[2] * s[3] / 1e6:.1f} M multiply-adds ({s[0]})")


if __name__ == "__main__":
    main()
