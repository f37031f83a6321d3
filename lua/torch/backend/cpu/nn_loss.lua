-- The CPU op table's criterion passes over class-index targets (ClassNLLCriterion,
-- SpatialClassNLLCriterion), loops reading the targets and weights through their pointers.
-- Operands arrive checked by the criterions (nn/util/targets.lua: class indices in range, weights
-- one per class). The elementwise criterions' loops are built by nn_loop (nn_pointwise) from
-- their bodies (nn/util/loss.lua). backend/cuda/nn_loss.lua has the same names.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'

local ptr = apply.ptr

local ops = {}

-- The pointer to a 1-D tensor's first element and its stride (read once per pass: each read
-- of a tensor's fields is a table lookup).
local function vector(t) return ptr(t), t:stride(1) end

-- The weight of 1-based class c in the weights at wp, step ws (1 when there are no weights).
local function classWeight(wp, ws, c)
  if not wp then return 1 end
  return tonumber(wp[(c - 1) * ws])
end

local function weightsOf(w)
  if not w then return nil, 0 end
  return vector(w)
end

-- The element pointer and the steps between rows and between columns of a 1-D (one row) or
-- 2-D tensor.
local function rows(t)
  if t:dim() == 1 then return ptr(t), 0, t:stride(1) end
  return ptr(t), t:stride(1), t:stride(2)
end

-- The sum of the class weights of the samples not ignored (t's first count targets).
local function totalWeight(tp, ts, count, wp, ws, ignore)
  local total = 0
  for i = 0, count - 1 do
    local c = tonumber(tp[i * ts])
    if c ~= ignore then total = total + classWeight(wp, ws, c) end
  end
  return total
end

-- ClassNLLCriterion's passes. input: one sample (1-D) or a row per sample; t: its checked class
-- indices (1-based); weights: one per class, or nil. Returns -sum_i w[t_i] x[i][t_i] over the
-- samples not ignored, and the total weight.
function ops.class_nll_forward(input, t, weights, ignore)
  local count = input:dim() == 1 and 1 or input:size(1)
  local p, si, sc = rows(input)
  local tp, ts = vector(t)
  local wp, ws = weightsOf(weights)
  local sum = 0
  for i = 0, count - 1 do
    local c = tonumber(tp[i * ts])
    if c ~= ignore then sum = sum - tonumber(p[i * si + (c - 1) * sc]) * classWeight(wp, ws, c) end
  end
  return sum, totalWeight(tp, ts, count, wp, ws, ignore)
end

-- gradInput (sized as input) = -w[t_i] at each sample's target, over the total weight when
-- sizeAverage; zero elsewhere, and everywhere unless the total weight is positive (torch7).
function ops.class_nll_backward(gradInput, t, weights, ignore, sizeAverage)
  gradInput:zero()
  local count = gradInput:dim() == 1 and 1 or gradInput:size(1)
  local tp, ts = vector(t)
  local wp, ws = weightsOf(weights)
  local total = totalWeight(tp, ts, count, wp, ws, ignore)
  if not (total > 0) then return end
  local norm = sizeAverage and total or 1
  local p, si, sc = rows(gradInput)
  for i = 0, count - 1 do
    local c = tonumber(tp[i * ts])
    if c ~= ignore then p[i * si + (c - 1) * sc] = -classWeight(wp, ws, c) / norm end
  end
end

-- SpatialClassNLLCriterion: one pass over the pixels of input N x C x H x W and target N x H x W;
-- returns -sum w[t] x[t] and sum w[t]; with grad (sized as input and zeroed), writes -w[t] at
-- each pixel's target class.
local function pixels(input, target, weights, grad)
  local n, h, w = target:size(1), target:size(2), target:size(3)
  local tp, ts1, ts2, ts3 = ptr(target), target:stride(1), target:stride(2), target:stride(3)
  local xp, xs1, xs2, xs3, xs4 = ptr(input), input:stride(1), input:stride(2), input:stride(3), input:stride(4)
  local gp = grad and ptr(grad)
  local gs1, gs2, gs3, gs4 = grad and grad:stride(1), grad and grad:stride(2), grad and grad:stride(3),
    grad and grad:stride(4)
  local wp, ws = weightsOf(weights)
  local sum, total = 0, 0
  for b = 0, n - 1 do
    for y = 0, h - 1 do
      for x = 0, w - 1 do
        local c = math.floor(tonumber(tp[b * ts1 + y * ts2 + x * ts3]))
        local wc = classWeight(wp, ws, c)
        total = total + wc
        sum = sum - tonumber(xp[b * xs1 + (c - 1) * xs2 + y * xs3 + x * xs4]) * wc
        if gp then gp[b * gs1 + (c - 1) * gs2 + y * gs3 + x * gs4] = -wc end
      end
    end
  end
  return sum, total
end

-- Returns the weighted sum and the total weight (m: the criterion, for its buffers).
function ops.spatial_class_nll_forward(_, input, target, weights)
  return pixels(input, target, weights)
end

-- gradInput = -w[t] at each pixel's target, over the total weight when sizeAverage; zero
-- everywhere unless the total weight is positive (torch7).
function ops.spatial_class_nll_backward(_, gradInput, input, target, weights, sizeAverage)
  gradInput:resizeAs(input):zero()
  local _, total = pixels(input, target, weights, gradInput)
  if not (total > 0) then return gradInput:zero() end
  if sizeAverage then gradInput:div(total) end
end

backend.register('cpu', ops)
