"""bench/machine.py's serial-fraction arithmetic (issue 25's Amdahl columns), checked on steps
whose thread CPU time is known: values, not timings."""
from __future__ import annotations

import threading

import pytest

from helpers import load_bench

machine = load_bench("machine.py", "bench_machine")


def test_karp_flatt_and_amdahl_are_inverse():
    assert machine.karp_flatt(1.0, 0.5, 2) == 0.0          # a perfect halving: nothing serial
    assert machine.karp_flatt(1.0, 1.0, 2) == 1.0          # no gain: all serial
    assert machine.karp_flatt(1.0, 0.475, 4) == pytest.approx(0.3)   # 0.3 + 0.7 / 4
    for serial in (0.0, 0.1, 0.5, 1.0):
        for n in (2, 8, 16):
            assert machine.karp_flatt(1.0, 1 / machine.amdahl_speedup(serial, n), n) == pytest.approx(serial)
    assert machine.amdahl_speedup(0.1, 8) == pytest.approx(1 / (0.1 + 0.9 / 8))


def test_thread_cpu_times_see_every_thread():
    ready, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=lambda: (ready.set(), done.wait()))
    worker.start()
    ready.wait()
    try:
        times = machine.thread_cpu_times()
        assert {threading.get_native_id(), worker.native_id} <= times.keys()
        assert all(t >= 0 for t in times.values())
    finally:
        done.set()
        worker.join()


def test_a_step_on_the_calling_thread_alone_is_all_serial():
    def step(reps: int) -> None:   # ~0.3 s of CPU on this thread, none on any other
        for _ in range(reps * 300_000):
            pass
    assert machine.serial_fraction(step, 10, threads=4) == 1.0


def test_serial_fraction_from_known_cpu_times(monkeypatch):
    """1 s of wall time with the workers' 1.5 s of CPU over 3 workers: 0.5 s in parallel regions,
    0.5 s serial; as a share of one-thread work 0.5 / (0.5 + 4 * 0.5) = 0.2."""
    main = threading.get_native_id()
    readings = iter([{main: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}, {main: 1.0, 1: 0.5, 2: 0.5, 3: 0.5}])
    clock = iter([10.0, 11.0])
    monkeypatch.setattr(machine, "thread_cpu_times", lambda: next(readings))
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(clock))
    assert machine.serial_fraction(lambda reps: None, 1, threads=4) == pytest.approx(0.2)
