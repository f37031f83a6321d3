"""cudnn's batch normalizations compute their parameter gradients in updateGradInput (cudnn.torch:
one cudnnBatchNormalizationBackward call for gradInput, gradWeight and gradBias; accGradParameters
is empty), checked against numpy's dgamma = sum(g * xhat), dbeta = sum(g); and a network whose
layers share one gradInput buffer (fb.resnet.torch's -shareGradInput, DenseNet's -optMemory) keeps
the batch normalization's gradients of an unshared copy when its container runs updateGradInput
and then accGradParameters."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from luabridge import t7

LUABRIDGE = [str(Path(sys.executable).with_name("luabridge"))]

SCRIPT = r"""
require 'cudnn'
local d = torch.load(arg[1])
local out = {}
local bn = cudnn.SpatialBatchNormalization(3):cuda()
bn.weight:copy(d.gamma); bn.bias:copy(d.beta)
bn:zeroGradParameters()
bn:forward(d.x)
out.gradInput = bn:updateGradInput(d.x, d.g):clone()
out.gw1, out.gb1 = bn.gradWeight:clone(), bn.gradBias:clone()
bn:accGradParameters(d.x, d.g, 1)            -- nothing: the gradients came with gradInput
out.gw2 = bn.gradWeight:clone()
bn:backward(d.x, d.g, 0.5)                   -- accumulates 0.5 times them
out.gw3, out.gb3 = bn.gradWeight:clone(), bn.gradBias:clone()

-- conv -> cudnn BN -> ReLU -> conv, the two convolutions' gradInputs on one storage
local function net()
  torch.manualSeed(3)
  return nn.Sequential():add(cudnn.SpatialConvolution(3, 4, 3, 3, 1, 1, 1, 1))
    :add(cudnn.SpatialBatchNormalization(4)):add(cudnn.ReLU(true))
    :add(cudnn.SpatialConvolution(4, 2, 3, 3, 1, 1, 1, 1)):cuda()
end
local plain, shared = net(), net()
local storage = torch.CudaStorage(1)
shared:get(1).gradInput = torch.CudaTensor(storage, 1, 0)
shared:get(4).gradInput = torch.CudaTensor(storage, 1, 0)
local gy = torch.CudaTensor(d.x:size(1), 2, d.x:size(3), d.x:size(4)):copy(d.gy)
for _, m in ipairs{plain, shared} do m:zeroGradParameters(); m:forward(d.x) end
plain:backward(d.x, gy)
shared:updateGradInput(d.x, gy); shared:accGradParameters(d.x, gy)
out.plainBN, out.sharedBN = plain:get(2).gradWeight:clone(), shared:get(2).gradWeight:clone()
out.plainBias, out.sharedBias = plain:get(2).gradBias:clone(), shared:get(2).gradBias:clone()
torch.save(arg[2], out)
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cudnnbn")
    rng = np.random.default_rng(11)
    data = {"x": rng.standard_normal((4, 3, 5, 5)).astype(np.float32),
            "g": rng.standard_normal((4, 3, 5, 5)).astype(np.float32),
            "gamma": rng.uniform(0.5, 1.5, 3).astype(np.float32), "beta": rng.standard_normal(3).astype(np.float32),
            "gy": rng.standard_normal((4, 2, 5, 5)).astype(np.float32)}
    t7.write(tmp / "in.t7", data)
    (tmp / "run.lua").write_text(SCRIPT)
    proc = subprocess.run([*LUABRIDGE, "th", str(tmp / "run.lua"), str(tmp / "in.t7"), str(tmp / "out.t7")],
                          env={**os.environ, "LUABRIDGE_CUDA_ON_CPU": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {k: v.astype(np.float64) for k, v in data.items()}, t7.read(tmp / "out.t7")


def test_update_grad_input_gives_the_parameter_gradients(out):
    d, o = out
    x, g = d["x"], d["g"]
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    xhat = (x - mean) / np.sqrt(var + 1e-5)
    dgamma, dbeta = (g * xhat).sum(axis=(0, 2, 3)), g.sum(axis=(0, 2, 3))
    np.testing.assert_allclose(o["gw1"], dgamma, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(o["gb1"], dbeta, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(o["gw2"], o["gw1"])          # accGradParameters adds nothing
    np.testing.assert_allclose(o["gw3"], 1.5 * dgamma, rtol=1e-4, atol=1e-4)   # backward's scale 0.5
    np.testing.assert_allclose(o["gb3"], 1.5 * dbeta, rtol=1e-4, atol=1e-4)
    # gradInput as the batch-statistics formula gives it
    n = x.shape[0] * x.shape[2] * x.shape[3]
    gi = d["gamma"].reshape(1, 3, 1, 1) / np.sqrt(var + 1e-5) * (
        g - g.mean(axis=(0, 2, 3), keepdims=True) - xhat * (g * xhat).sum(axis=(0, 2, 3), keepdims=True) / n)
    np.testing.assert_allclose(o["gradInput"], gi, rtol=1e-4, atol=1e-4)


def test_shared_grad_input_buffers_keep_the_batch_norm_gradients(out):
    _, o = out
    np.testing.assert_allclose(o["sharedBN"], o["plainBN"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(o["sharedBias"], o["plainBias"], rtol=1e-6, atol=1e-6)
    assert np.abs(o["plainBN"]).max() > 1e-3
