"""The fuzz runs show progress (issue 26): tests/fuzz_progress.py's FuzzProgress, fed by the
runners of fuzz_tensor.py (fuzz_nn, fuzz_image, fuzz_convert, fuzz_interrupt use it) and
fuzz_t7.py; --progress / --no-progress, shown by default only when stdout is a terminal."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import fuzz_nn
import fuzz_progress
import fuzz_tensor
from fuzz_progress import FuzzProgress

TESTS = Path(__file__).resolve().parent


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_line_every_five_percent_with_time_left() -> None:
    clock, stream = _Clock(), io.StringIO()
    p = FuzzProgress("fz", 40, stream, clock=clock)
    for done in range(1, 41):
        clock.now += 0.5
        p.update(done, 1 if done > 30 else 0)
    p.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 21   # 0% (the first case), then every 5%: two cases each
    assert lines[0] == "fz: 1 of 40 cases (0%), 0 failed, 0 s, about 20 s left"
    assert lines[10] == "fz: 20 of 40 cases (50%), 0 failed, 10 s, about 10 s left"
    assert lines[-1] == "fz: 40 of 40 cases (100%), 1 failed, 20 s"


def test_on_a_terminal_one_line_rewritten() -> None:
    stream = _Terminal()
    p = FuzzProgress("fz", 4, stream, every=50, clock=_Clock())
    for done in range(1, 5):
        p.update(done, 0)
    p.close()
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") == 3
    assert text.rstrip("\n").rsplit("\r", 1)[-1] == "fz: 4 of 4 cases (100%), 0 failed, 0 s\033[K"


def test_shown_by_default_only_on_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdout", _Terminal())
    assert fuzz_progress.wanted(None) and not fuzz_progress.wanted(False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert not fuzz_progress.wanted(None) and fuzz_progress.wanted(True)


def test_the_tensor_runner_reports_each_case() -> None:
    stream = io.StringIO()
    failures = fuzz_tensor.fuzz(7, 8, 4, fuzz_nn.make_case, "torch,nn",
                                progress=FuzzProgress("fuzz_nn", 8, stream, every=25))
    assert failures == []
    lines = stream.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [f"fuzz_nn: {n} of 8 cases ({p}%)" for n, p in
                                                      [(1, 0), (2, 25), (4, 50), (6, 75), (8, 100)]]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TESTS / script), *args], capture_output=True, text=True, timeout=300)


def test_fuzz_t7_command_progress(tmp_path) -> None:
    r = _run("fuzz_t7.py", "--cases", "30", "--chunk", "15", "--jobs", "1", "--progress", "--failures", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "fuzz_t7: 30 of 30 cases (100%), 0 failed" in r.stderr
    r = _run("fuzz_t7.py", "--cases", "10", "--jobs", "1", "--failures", str(tmp_path))
    assert r.returncode == 0 and "cases (" not in r.stderr   # not a terminal, not asked: nothing


def test_fuzz_nn_command_progress() -> None:
    r = _run("fuzz_nn.py", "--cases", "6", "--chunk", "3", "--progress")
    assert r.returncode == 0, r.stderr
    assert "fuzz_nn: 6 of 6 cases (100%), 0 failed" in r.stderr and r.stdout.endswith("6 passed, 0 failed\n")
    r = _run("fuzz_nn.py", "--cases", "3", "--no-progress")
    assert r.returncode == 0 and "cases (" not in r.stderr
