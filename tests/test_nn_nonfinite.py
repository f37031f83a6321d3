"""nn kernels on NaN, infinite and huge inputs never corrupt memory (tests/scripts/nonfinite_sweep.lua),
with the JIT on and off: LuaJIT's math.max/min treat NaN differently in each, and kernels that
compute indices from data must stay inside their buffers either way. Run in a child process so
that a crash fails the test instead of ending the run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "scripts" / "nonfinite_sweep.lua"


@pytest.mark.parametrize("jit_off", [False, True])
def test_nonfinite_inputs_never_crash(jit_off):
    env = dict(os.environ)
    env.pop("LUABRIDGE_JIT_OFF", None)
    if jit_off:
        env["LUABRIDGE_JIT_OFF"] = "1"
    out = subprocess.run([sys.executable, "-m", "luabridge", "th", str(SCRIPT)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "all ran", out.stdout[-2000:]
