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


def test_thread_time_gives_the_fraction_and_cpu_per_step(monkeypatch):
    """The same readings over 2 steps: fraction 0.2, and (1.0 + 1.5) s of CPU over 2 steps."""
    main = threading.get_native_id()
    readings = iter([{main: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}, {main: 1.0, 1: 0.5, 2: 0.5, 3: 0.5}])
    clock = iter([10.0, 11.0])
    monkeypatch.setattr(machine, "thread_cpu_times", lambda: next(readings))
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(clock))
    fraction, cpu = machine.thread_time(lambda reps: None, 2, threads=4)
    assert fraction == pytest.approx(0.2)
    assert cpu == pytest.approx(1.25)


def test_serial_rows_without_a_one_thread_run():
    """bench/real_models.py --threads 2 alone (no 1-thread count) still prints the serial table's
    row: the CPU-time columns, Karp-Flatt's as '-' and Amdahl's from the CPU-time fraction."""
    rm = load_bench("real_models.py", "bench_real_models_rows")
    t = rm.Timing(0.010, 0.25, 0.018)
    row = rm.ROWS[0]
    lines = list(rm.serial_rows(row, {2: rm.Result(t, rm.Timing(0.008, 0.0, 0.016), 1e9)}))
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cells[2:9] == ["2", "18.00", "16.00", "0.25", "0.00", "-", "-"]
    assert cells[9] == f"{machine.amdahl_speedup(0.25, 8):.1f}x / {machine.amdahl_speedup(0.25, 16):.1f}x"
