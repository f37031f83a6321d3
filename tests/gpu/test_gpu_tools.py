"""bench/gpu.py and bench/device_check.sh on a machine without a CUDA device: each says so
clearly (the bench exits 0, the check 2) instead of failing somewhere inside."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_mode import ON_DEVICE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(ON_DEVICE, reason="a CUDA device is present: bench/device_check.sh runs these for real")


def test_bench_without_a_device_says_so():
    run = subprocess.run([sys.executable, "bench/gpu.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "bench/gpu.py: no CUDA device" in run.stdout and "nothing to measure" in run.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is present")
def test_device_check_without_a_device_stops_there(tmp_path):
    report = tmp_path / "check.md"
    run = subprocess.run(["bash", "bench/device_check.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "DEVICE_CHECK_REPORT": str(report)})
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no CUDA device found" in run.stdout
    assert "no CUDA device found" in report.read_text()
