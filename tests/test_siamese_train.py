"""A siamese network as cvpr15deepcompare's train.lua builds and trains it (models/siam.lua: two towers
sharing weight, bias and their gradients in nn.Parallel(2, 2), a Linear top, MarginCriterion, cudnn.convert
then :cuda() under LUABRIDGE_CUDA_ON_CPU=1, optim.asgd).

The corpus program "deepcompare train siam" once failed its falling-loss check 2 runs in 3. Its loss is
1 - mean(y * output) over balanced batches, 1 +- 3e-4 in every run: the network learns the corpus' pairs too
slowly to show in 16 steps, under Torch7's arithmetic as under ours. This file holds the evidence that the
flat loss is not ours: the towers stay shared through cudnn.convert and :cuda(), the Double gradient matches
central differences, the CUDA-on-CPU (Float) gradient matches the Double one, and an ASGD step lowers the
batch's loss by what the gradient predicts.
"""
from __future__ import annotations

import json

from helpers import run_script

SCRIPT = r"""
require 'nn'; require 'cunn'; require 'cudnn'; require 'optim'
torch.manualSeed(7)
local function tower()
  local t = nn.Sequential()
  t:add(nn.Reshape(1, 16, 16))
  t:add(nn.SpatialConvolution(1, 4, 5, 5, 2, 2))
  t:add(nn.ReLU())
  t:add(nn.SpatialMaxPooling(2, 2, 2, 2))
  t:add(nn.View(-1):setNumInputDims(3))
  t:add(nn.Contiguous())
  return t
end
local desc = tower()
local other = desc:clone()
desc:share(other, 'weight', 'bias', 'gradWeight', 'gradBias')
local model = nn.Sequential()
  :add(nn.Parallel(2, 2):add(desc):add(other))
  :add(nn.Sequential():add(nn.Linear(72, 8)):add(nn.ReLU()):add(nn.Linear(8, 1)))
model:double()
local crit = nn.MarginCriterion()
local x = torch.randn(8, 2, 16, 16)
local y = torch.Tensor{1, -1, 1, -1, 1, -1, 1, -1}
local out = {}
local params, grads = model:getParameters()
out.nparams = params:nElement()
out.tower = desc.modules[2].weight:nElement() + desc.modules[2].bias:nElement()
local function loss() return crit:forward(model:forward(x), y) end
grads:zero()
out.loss = loss()
model:backward(x, crit:backward(model.output, y))
local g = grads:clone()
out.analytic, out.numeric = {}, {}
local p0 = params:clone()
for k = 1, 4 do
  local d = torch.randn(params:nElement()); d:div(d:norm())
  params:copy(p0):add(1e-6, d); local up = loss()
  params:copy(p0):add(-1e-6, d); local down = loss()
  params:copy(p0)
  out.analytic[k], out.numeric[k] = g:dot(d), (up - down) / 2e-6
end
-- the program's path: cudnn.convert then :cuda() (Float on the CPU), the same weights
local cm = cudnn.convert(model:clone(), cudnn):cuda()
local cp, cg = cm:getParameters()
out.cuda_nparams = cp:nElement()
cg:zero()
local cc = nn.MarginCriterion():cuda()
out.cuda_loss = cc:forward(cm:forward(x:cuda()), y:cuda())
cm:backward(x:cuda(), cc:backward(cm.output, y:cuda()))
out.cuda_grad_diff = (cg:double() - g):norm() / g:norm()
-- one optim.asgd step (the script's optimizer), lambda 0 to see the gradient's effect alone
local eta = 1e-3
optim.asgd(function() return out.loss, g end, params, {eta0 = eta, lambda = 0, t0 = 1e4})
out.moved = (params - p0):norm()
out.asgd_loss = loss()
out.predicted = out.loss - eta * g:dot(g)
out.gnorm = g:norm()
print('RESULT ' .. require('cjson').encode(out))
"""


def test_siamese_shares_its_towers_and_its_gradient_is_right(tmp_path, monkeypatch):
    monkeypatch.setenv("LUABRIDGE_CUDA_ON_CPU", "1")
    run = run_script(tmp_path, SCRIPT)
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.split("RESULT ", 1)[1])
    top = 72 * 8 + 8 + 8 + 1
    # one tower's parameters, not two: the sharing survives getParameters, cudnn.convert and :cuda()
    assert out["nparams"] == out["tower"] + top == 4 * 25 + 4 + top
    assert out["cuda_nparams"] == out["nparams"]
    for a, n in zip(out["analytic"], out["numeric"]):
        assert abs(a - n) <= 1e-6 * max(1.0, abs(n)) + 1e-8, (out["analytic"], out["numeric"])
    assert abs(out["cuda_loss"] - out["loss"]) < 1e-5
    assert out["cuda_grad_diff"] < 1e-4
    # ASGD moved the parameters by eta * |g| and the loss fell by about eta * |g|^2 (first order)
    assert abs(out["moved"] - 1e-3 * out["gnorm"]) < 1e-9 + 1e-6 * out["gnorm"]
    drop, predicted = out["loss"] - out["asgd_loss"], out["loss"] - out["predicted"]
    assert drop > 0 and abs(drop - predicted) < 0.05 * predicted, (drop, predicted)
