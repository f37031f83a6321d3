-- The CPU op table's criterion passes over class-index targets and per-sample labels
-- (ClassNLLCriterion, SpatialClassNLLCriterion, MultiMarginCriterion, MultiLabelMarginCriterion,
-- CosineEmbeddingCriterion's per-pair loop, the criterions' target range check), loops reading
-- the targets, weights and inputs through their pointers. Operands arrive checked by the
-- criterions (nn/util/targets.lua: class indices in range, weights one per class, host tensors).
-- The elementwise criterions' loops are built by nn_loop (nn_pointwise) from their bodies
-- (nn/util/loss.lua). backend/cuda/nn_loss.lua has the same names.
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

-- The first of t's first `count` class indices (step stride(1)) that is not an integer in
-- [1, nClasses] nor `ignore`, or nil when all are (the criterions raise with it).
function ops.class_target_check(t, count, nClasses, ignore)
  local p, s = vector(t)
  for i = 0, count - 1 do
    local c = tonumber(p[i * s])
    if c ~= ignore and not (c >= 1 and c <= nClasses and c == math.floor(c)) then return c end
  end
  return nil
end

-- MultiMarginCriterion: over the samples (rows of input, 1-D: one) of class t_i, the sum of
-- w[t_i] * sum over d ~= t_i of max(0, margin - x[t_i] + x[d])^p (p 1 or 2).
function ops.multi_margin_forward(input, t, weights, p, margin)
  local nframe, dim = input:dim() == 1 and 1 or input:size(1), input:size(input:dim())
  local xp, rs, cs = rows(input)
  local tp, ts = vector(t)
  local wp, ws = weightsOf(weights)
  local square = p == 2
  local sum = 0
  for i = 0, nframe - 1 do
    local c = tonumber(tp[i * ts])
    local row = i * rs
    local xc = tonumber(xp[row + (c - 1) * cs])
    local rowSum = 0
    for d = 0, dim - 1 do
      local z = margin - xc + tonumber(xp[row + d * cs])
      if d ~= c - 1 and z > 0 then rowSum = rowSum + (square and z * z or z) end
    end
    sum = sum + rowSum * classWeight(wp, ws, c)
  end
  return sum
end

-- Its gradient (gradInput sized as input), g the factor of every hinge (1 / dim, over the
-- samples too with sizeAverage).
function ops.multi_margin_backward(gradInput, input, t, weights, p, margin, g)
  local nframe, dim = input:dim() == 1 and 1 or input:size(1), input:size(input:dim())
  local xp, rs, cs = rows(input)
  local gp, grs, gcs = rows(gradInput)
  local tp, ts = vector(t)
  local wp, ws = weightsOf(weights)
  local square = p == 2
  for i = 0, nframe - 1 do
    local c = tonumber(tp[i * ts])
    local row, grow = i * rs, i * grs
    local xc = tonumber(xp[row + (c - 1) * cs])
    local scale = g * classWeight(wp, ws, c)
    local gc = 0
    for d = 0, dim - 1 do
      local z = margin - xc + tonumber(xp[row + d * cs])
      local h = 0
      if d ~= c - 1 and z > 0 then h = square and 2 * scale * z or scale end
      gp[grow + d * gcs] = h
      gc = gc - h
    end
    gp[grow + (c - 1) * gcs] = gc
  end
end

-- MultiLabelMarginCriterion: isTarget (zeroed, sized as target) gets 1 at each sample's listed
-- classes (its target row up to the first 0).
function ops.multi_label_margin_mark(isTarget, target)
  local nframe, dim = target:dim() == 1 and 1 or target:size(1), target:size(target:dim())
  local ip, irs, ics = rows(isTarget)
  local tp, trs, tcs = rows(target)
  for i = 0, nframe - 1 do
    for k = 0, dim - 1 do
      local c = math.floor(tonumber(tp[i * trs + k * tcs]))
      if c == 0 then break end
      ip[i * irs + (c - 1) * ics] = 1
    end
  end
end

-- The summed hinges max(0, 1 - x[j] + x[d]) over listed classes j and unlisted d of every
-- sample; with gradInput (zeroed, sized as input), each active hinge also moves g from
-- gradInput[j] to gradInput[d].
function ops.multi_label_margin(input, target, isTarget, g, gradInput)
  local nframe, dim = input:dim() == 1 and 1 or input:size(1), input:size(input:dim())
  local p, rs, cs = rows(input)
  local ip, irs, ics = rows(isTarget)
  local tp, trs, tcs = rows(target)
  local gp, grs, gcs
  if gradInput then gp, grs, gcs = rows(gradInput) end
  local sum = 0
  for i = 0, nframe - 1 do
    local row, irow = i * rs, i * irs
    for k = 0, dim - 1 do
      local j = math.floor(tonumber(tp[i * trs + k * tcs])) - 1
      if j < 0 then break end
      local xj = tonumber(p[row + j * cs])
      for d = 0, dim - 1 do
        -- branch-free unless a gradient is wanted (isTarget holds 0 or 1)
        local h = math.max(0, 1 - xj + tonumber(p[row + d * cs])) * (1 - ip[irow + d * ics])
        sum = sum + h
        if gp and h > 0 then
          local grow = i * grs
          gp[grow + j * gcs] = gp[grow + j * gcs] - g
          gp[grow + d * gcs] = gp[grow + d * gcs] + g
        end
      end
    end
  end
  return sum
end

-- CosineEmbeddingCriterion's pairs: label y (1 or -1) and cosine c give the loss 1 - c (y = 1)
-- or max(0, c - margin), and the factor of c's gradient in it.
local function pairLoss(y, c, margin)
  if y == 1 then return 1 - c, -1 end
  if c > margin then return c - margin, 1 end
  return 0, 0
end

-- The summed losses of the pairs (labels: N, cosines: N x 1 or N, read by their first stride).
function ops.cosine_embedding_forward(labels, cos, margin)
  local yp, ys = vector(labels)
  local cp, cs = vector(cos)
  local sum = 0
  for i = 0, labels:size(1) - 1 do
    sum = sum + pairLoss(tonumber(yp[i * ys]), tonumber(cp[i * cs]), margin)
  end
  return sum
end

-- coef (N x 1, contiguous) = each pair's cosine gradient factor times scale; 0 for a pair of
-- zero loss (torch7's).
function ops.cosine_embedding_coef(coef, labels, cos, margin, scale)
  local yp, ys = vector(labels)
  local cp, cs = vector(cos)
  local out = ptr(coef)
  for i = 0, labels:size(1) - 1 do
    local l, f = pairLoss(tonumber(yp[i * ys]), tonumber(cp[i * cs]), margin)
    out[i] = l > 0 and f * scale or 0
  end
end

backend.register('cpu', ops)
