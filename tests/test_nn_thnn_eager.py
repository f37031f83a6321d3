"""require 'nn' loads nn.THNN, as torch/nn's init.lua did: a custom layer written against THNN
(BinaryNet's BinarySpatialConvolution calls input.THNN.SpatialConvolutionMM_updateOutput) works
in a fresh th with nothing else required. The expected convolution is numpy's."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = r"""
require 'nn'
local x = torch.DoubleTensor(1, 2, 4, 5)
local w = torch.DoubleTensor(3, 2 * 3 * 3)
local b = torch.DoubleTensor(3)
local k = 0
x:apply(function() k = k + 1; return math.sin(k) end)
w:apply(function() k = k + 1; return math.cos(k) end)
b:apply(function() k = k + 1; return k / 100 end)
local out, finput, fgradInput = torch.DoubleTensor(), torch.DoubleTensor(), torch.DoubleTensor()
assert(x.THNN, 'no THNN on tensors after require nn')
x.THNN.SpatialConvolutionMM_updateOutput(x:cdata(), out:cdata(), w:cdata(), b:cdata(),
   finput:cdata(), fgradInput:cdata(), 3, 3, 1, 1, 1, 1)
print(require('cjson').encode({x = x:storage():totable(), w = w:storage():totable(),
   b = b:storage():totable(), out = out:storage():totable(), size = out:size():totable()}))
"""


def test_thnn_on_tensors_after_require_nn():
    exe = Path(sys.executable).parent / "luabridge"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "luabridge"]
    proc = subprocess.run([*cmd, "th", "-e", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    x = np.array(got["x"]).reshape(1, 2, 4, 5)
    w = np.array(got["w"]).reshape(3, 2, 3, 3)
    b = np.array(got["b"])
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 4, 5))
    for o in range(3):
        for i in range(4):
            for j in range(5):
                want[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * w[o]).sum() + b[o]
    assert got["size"] == [1, 3, 4, 5]
    np.testing.assert_allclose(np.array(got["out"]).reshape(1, 3, 4, 5), want, rtol=1e-12, atol=1e-12)


SCRIPT_ACC = r"""
require 'nn'
local x = torch.DoubleTensor(2, 2, 4, 5)
local w4 = torch.DoubleTensor(3, 2, 3, 3)
local b = torch.DoubleTensor(3)
local go = torch.DoubleTensor(2, 3, 4, 5)
local k = 0
for _, t in ipairs({x, w4, b, go}) do t:apply(function() k = k + 1; return math.sin(k * 0.7) end) end
local gw4, gb = torch.DoubleTensor(3, 2, 3, 3):zero(), torch.DoubleTensor(3):zero()
local out, gi, finput, fgradInput = torch.DoubleTensor(), torch.DoubleTensor(), torch.DoubleTensor(), torch.DoubleTensor()
-- as BinaryNet's BinarySpatialConvolution: a fresh 2-D view of the weight at each call
local function view(t) return t:view(3, 2 * 3 * 3) end
x.THNN.SpatialConvolutionMM_updateOutput(x:cdata(), out:cdata(), view(w4):cdata(), b:cdata(),
   finput:cdata(), fgradInput:cdata(), 3, 3, 1, 1, 1, 1)
x.THNN.SpatialConvolutionMM_updateGradInput(x:cdata(), go:cdata(), gi:cdata(), view(w4):cdata(),
   finput:cdata(), fgradInput:cdata(), 3, 3, 1, 1, 1, 1)
x.THNN.SpatialConvolutionMM_accGradParameters(x:cdata(), go:cdata(), view(gw4):cdata(), gb:cdata(),
   finput:cdata(), fgradInput:cdata(), 3, 3, 1, 1, 1, 1, 0.5)
print(require('cjson').encode({x = x:storage():totable(), w = w4:storage():totable(), go = go:storage():totable(),
   gi = gi:storage():totable(), gw = gw4:storage():totable(), gb = gb:storage():totable()}))
"""


def test_thnn_convolution_passes_share_the_layer_state():
    """updateGradInput and accGradParameters after updateOutput of the same layer (same finput),
    the weight re-viewed between the calls; values against numpy (scale 0.5)."""
    exe = Path(sys.executable).parent / "luabridge"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "luabridge"]
    proc = subprocess.run([*cmd, "th", "-e", SCRIPT_ACC], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    x = np.array(got["x"]).reshape(2, 2, 4, 5)
    w = np.array(got["w"]).reshape(3, 2, 3, 3)
    go = np.array(got["go"]).reshape(2, 3, 4, 5)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    gw = np.zeros_like(w)
    gip = np.zeros_like(xp)
    for n in range(2):
        for i in range(4):
            for j in range(5):
                gw += 0.5 * go[n, :, i, j][:, None, None, None] * xp[n, None, :, i:i + 3, j:j + 3]
                gip[n, :, i:i + 3, j:j + 3] += np.einsum("o,ochw->chw", go[n, :, i, j], w)
    np.testing.assert_allclose(np.array(got["gw"]).reshape(3, 2, 3, 3), gw, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.array(got["gb"]), 0.5 * go.sum(axis=(0, 2, 3)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.array(got["gi"]).reshape(2, 2, 4, 5), gip[:, :, 1:-1, 1:-1], rtol=1e-12, atol=1e-12)
