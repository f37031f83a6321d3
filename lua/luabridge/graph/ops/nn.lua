-- The nn modules behind the graph's nn ops (luabridge/graph/ops/nn.py): M[op](ishape, kwarg)
-- builds the module once per executor, from the input shapes (tables of sizes) and the op's
-- string attributes (tinyflow's: ksize and strides [1, h, w, 1], padding 'SAME' or 'VALID').
require 'nn'
local tuple = require('luabridge.graph.executor').tuple
local M = {}

function M.softmax() return nn.SoftMax() end
function M.relu() return nn.ReLU() end
function M.tanh() return nn.Tanh() end

function M.linear(ishape)
  local w = ishape[2]
  local m = nn.Linear(w[2], w[1])
  if #ishape == 2 then m:noBias() end
  return m
end

function M.pad(ishape, kwarg)
  return nn.Padding(tonumber(kwarg.dim or 0) + 1, tonumber(kwarg.pad or 0))
end

-- 'SAME' pads (k - 1) // 2 on each side, 'VALID' none
local function padding(kwarg, kH, kW)
  if (kwarg.padding or 'SAME') ~= 'SAME' then return 0, 0 end
  return math.floor((kH - 1) / 2), math.floor((kW - 1) / 2)
end

function M.conv2d(ishape, kwarg)
  local w, s = ishape[2], tuple(kwarg.strides, {1, 1, 1, 1})
  local kH, kW = w[3], w[4]
  local padH, padW = padding(kwarg, kH, kW)
  local m = nn.SpatialConvolution(w[2], w[1], kW, kH, s[3], s[2], padW, padH)
  if #ishape == 2 then m:noBias() end
  return m
end

-- kW, kH, dW, dH, padW, padH of a pooling op
local function window(kwarg)
  local k, s = tuple(kwarg.ksize, {1, 1, 1, 1}), tuple(kwarg.strides, {1, 1, 1, 1})
  local padH, padW = padding(kwarg, k[2], k[3])
  return k[3], k[2], s[3], s[2], padW, padH
end

function M.max_pool(ishape, kwarg) return nn.SpatialMaxPooling(window(kwarg)) end
function M.avg_pool(ishape, kwarg) return nn.SpatialAveragePooling(window(kwarg)) end

function M.batch_normalization(ishape)
  local n = ishape[1][2]
  if #ishape[1] == 4 then return nn.SpatialBatchNormalization(n) end
  return nn.BatchNormalization(n)
end

-- CrossEntropyCriterion (mean over the batch) on 0-based labels: the target is shifted into a
-- buffer of the module's before each call
function M.mean_sparse_softmax_cross_entropy_with_logits()
  local m = nn.CrossEntropyCriterion()
  local shifted = torch.Tensor()
  local forward, backward = m.updateOutput, m.updateGradInput
  local function oneBased(target)
    return shifted:resize(target:size()):copy(target):add(1)
  end
  function m:updateOutput(input, target) return forward(self, input, oneBased(target)) end
  function m:updateGradInput(input, target) return backward(self, input, oneBased(target)) end
  return m
end

return M
