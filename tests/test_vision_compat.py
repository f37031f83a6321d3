"""Small torch7 behaviours that public vision code relies on (tools/corpus/vision.toml)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import N, T, assert_lua_errors, lua_fn


def test_batchnorm_false_momentum_and_eps_are_the_defaults(rng):
    """torch7's BatchNormalization reads `momentum or 0.1` and `eps or 1e-5`: XNOR-Net's
    nn.SpatialBatchNormalization(n, 1e-4, false) has momentum 0.1 and an affine transform."""
    x = rng.standard_normal((4, 3, 2, 2))
    f = lua_fn("""function(x)
      require "nn"
      local m = nn.SpatialBatchNormalization(3, 1e-4, false)
      local e = nn.BatchNormalization(3, false, false)
      m:forward(x)
      return m.momentum, m.eps, m.affine, m.weight ~= nil, e.eps, e.momentum, m.running_mean:clone()
    end""")
    momentum, eps, affine, has_weight, e_eps, e_momentum, running_mean = f(T(x))
    assert (momentum, eps, affine, has_weight, e_eps, e_momentum) == (0.1, 1e-4, True, True, 1e-5, 0.1)
    np.testing.assert_allclose(N(running_mean), 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-12)


def test_batchnorm_true_eps_is_still_an_error():
    # torch7 kept eps = true and failed in THNN's C call; here the constructor says so
    assert_lua_errors([("function() require 'nn'; nn.BatchNormalization(3, true) end", r"eps must be a number, got boolean"),
                       ("function() require 'nn'; nn.SpatialBatchNormalization(3, 1e-5, true) end",
                        r"momentum must be a number, got boolean")])


def test_cutorch_set_heap_tracking():
    """BinaryNet's Main_BinaryNet_*.lua calls cutorch.setHeapTracking(true) after setDevice."""
    import subprocess
    import sys
    from pathlib import Path
    exe = Path(sys.executable).parent / "luabridge"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "luabridge"]
    script = ("require 'cutorch'; cutorch.setHeapTracking(true); cutorch.setHeapTracking(false); "
              "print(pcall(cutorch.setHeapTracking, 1))")
    proc = subprocess.run([*cmd, "th", "-e", script], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "LUABRIDGE_CUDA_ON_CPU": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("false") and "cutorch.setHeapTracking: a boolean expected, got number" in proc.stdout
