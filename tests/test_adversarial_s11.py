"""Adversarial inputs for session 11's FFI paths (oneDNN eltwise/softmax/binary passes, blocked
elementwise evaluation, Dropout's masks, conv-net plans, threaded fused groups).

Each case runs as a whole program in its own process (`luabridge th`, or python -c), so a
segfault fails the test (a negative exit status) rather than killing pytest. Each asserts a
clear error naming the module or op and the sizes, or the right values.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_script


def th(tmp_path: Path, source: str) -> str:
    """Runs source as `luabridge th`; fails on a crash or a non-zero exit; its stdout."""
    r = run_script(tmp_path, source, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def py(source: str, timeout: float = 300) -> str:
    r = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


# Prints "<label>\t<error or ok>" for each call: the tests assert on these lines.
PRELUDE = r"""
require 'nn'
require('torch.backend.cpu.dnnl_eltwise').forceThreads = 2
function try(label, f)
  local ok, e = pcall(f)
  print(label .. '\t' .. (ok and 'ok' or tostring(e)))
end
"""


def lines(out: str) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


def test_activation_backward_after_input_resized(tmp_path: Path) -> None:
    """A backward reading the last forward's output (Tanh, Sigmoid, ELU, Sqrt, Exp) with an input
    resized since: the loop read past the output's memory (a segfault); now a clear error, and
    gradInput is left as it was. ReLU (reads the input) still runs."""
    out = lines(th(tmp_path, PRELUDE + r"""
for _, name in ipairs{'Tanh', 'Sigmoid', 'ELU', 'Sqrt', 'Exp'} do
  local m = nn[name]():float()
  m:forward(torch.rand(2):float())
  local before = m.gradInput:nElement()
  try(name, function() m:backward(torch.rand(1000000):float(), torch.ones(1000000):float()) end)
  print(name .. ' gradInput\t' .. m.gradInput:nElement() .. ' ' .. before)
end
local m = nn.ReLU():float()
m:forward(torch.rand(2):float())
try('ReLU', function() assert(m:backward(torch.rand(1000):float(), torch.ones(1000):float()):sum() == 1000) end)
"""))
    for name in ("Tanh", "Sigmoid", "ELU", "Sqrt", "Exp"):
        assert f"nn.{name}: the output of the last forward (2) does not match input size 1000000" in out[name]
        assert out[f"{name} gradInput"] == "0 0"
    assert out["ReLU"] == "ok"


def test_softmax_backward_after_input_resized(tmp_path: Path) -> None:
    """LogSoftMax's row loop read gradOutput for the stale output's rows (past its memory); all
    the softmax modules now name the stale output's size."""
    out = lines(th(tmp_path, PRELUDE + r"""
for _, name in ipairs{'LogSoftMax', 'SoftMax', 'SoftMin', 'SpatialSoftMax', 'SpatialLogSoftMax'} do
  local m = nn[name]():float()
  local big = name:find('Spatial') and {200, 10, 10, 10} or {20000, 10}
  m:forward(torch.rand(torch.LongStorage(big)):float())
  big[1] = 1
  local s = torch.LongStorage(big)
  try(name, function() m:backward(torch.rand(s):float(), torch.ones(s):float()) end)
end
"""))
    for name in ("LogSoftMax", "SoftMax", "SoftMin"):
        assert f"nn.{name}: the output of the last forward (20000x10) does not match input size 1x10" in out[name]
    for name in ("SpatialSoftMax", "SpatialLogSoftMax"):
        assert f"nn.{name}: the output of the last forward (200x10x10x10) does not match input size 1x10x10x10" in out[name]
