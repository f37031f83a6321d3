"""How long the workers of a runtime's thread team live (lua/luabridge/graph/fusion_threads.lua:
large fused CPU groups and the parallel loops run on them). They ended only when Python collected
their runtime: after their thread ended they waited for jobs until the next garbage collection
(with gc off, for ever). Now they end on fusion_threads.stop() (waiting for them), within a
second or two of their thread's end, and the process exits promptly with them parked.
gemm_async's second-thread worker now ends by itself the same way (luabridge.stop_workers() ends
both at once: tests/test_stop_workers.py). Threads are counted in /proc/self/task. Each case
runs in its own process under a deadline."""
from __future__ import annotations

import sys

import pytest

from processes import run_in_own_group
from worker_lifetimes import PRELUDE, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")


def test_stop_ends_the_workers_and_a_later_run_starts_new_ones() -> None:
    out = run(r"""
base = tasks()
print('first', group(1), tasks() - base)
fusion_threads.stop()
print('after stop', settle(base, 5) - base)
fusion_threads.stop()   # again: nothing to stop
print('again', group(2), tasks() - base)
fusion_threads.stop()
print('end', settle(base, 5) - base)
""")
    assert "first True 1" in out, out
    # stop() joins them: gone on return, though their /proc/self/task entry can outlast the join
    # by a moment on a busy machine
    assert "after stop 0" in out, out
    assert "again True 1" in out, out
    assert "end 0" in out, out


@pytest.mark.parametrize("job", ["group", "product"])
def test_the_workers_of_a_thread_that_ended_end_without_a_collection(job: str) -> None:
    """group: the fused groups' team; product: gemm_async's second-thread worker, which waited for
    jobs until its runtime was collected too, and now looks the same way (threads/pthread.lua)."""
    out = run(r"""
gc.disable()   # the runtimes of the threads stay uncollected
base = tasks()
out = {}
def work(i):
    out[i] = JOB(i)
for rnd in range(2):
    ts = [threading.Thread(target=work, args=(rnd * 3 + i,)) for i in range(3)]
    [t.start() for t in ts]; [t.join() for t in ts]
if 'no oneDNN' in out.values():
    print('SKIP no oneDNN'); sys.exit(0)
print('values', sorted(out.values()) == [True] * 6)
print('left', settle(base) - base)
""".replace("JOB", job))
    if "SKIP no oneDNN" in out:
        pytest.skip("needs oneDNN (the product worker runs dnnl_sgemm)")
    assert "values True" in out, out
    assert "left 0" in out, out


def test_a_thread_team_stays_while_its_thread_runs() -> None:
    """An idle team whose thread still runs keeps its workers (they look, and wait again)."""
    out = run(r"""
base = tasks()
go, done = threading.Event(), threading.Event()
res = {}
def work():
    res['a'] = group(1)
    go.set()
    done.wait()
    res['b'] = group(2)   # the same workers
    res['runs'] = fusion_threads.jobs()
t = threading.Thread(target=work)
t.start()
go.wait()
time.sleep(2.5)   # past two of the workers' looks
print('while idle', tasks() - base)
done.set(); t.join()
print('values', res['a'], res['b'], res['runs'][0])
print('left', settle(base) - base)
""")
    assert "while idle 2" in out, out   # the thread and its worker
    assert "values True True 2" in out, out
    assert "left 0" in out, out


def test_the_process_exits_with_teams_parked() -> None:
    """Teams in the main runtime and in a daemon thread's runtime that still runs: the process
    exits at once, status 0, nothing on stderr."""
    r = run_in_own_group([sys.executable, "-c", PRELUDE + r"""
print('main', group(1))
ready = threading.Event()
def idle():
    print('thread', group(2), flush=True)
    ready.set()
    time.sleep(3600)
threading.Thread(target=idle, daemon=True).start()
ready.wait()
"""], timeout=120)
    assert r.returncode == 0 and "main True" in r.stdout and "thread True" in r.stdout, r
    assert r.stderr == "", r.stderr
