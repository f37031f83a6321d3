-- Elementwise criterions: loss = sum_i f(x_i, y_i [, w_i]) (divided by the element count when
-- sizeAverage) and gradInput_i = norm * f'(x_i, y_i [, w_i]), each compiled once, by every device
-- that compiles loops (the op table's nn_loop), into ops of the op table (backend.define).
-- Bodies name the input element X, the target element Y, the weight W, the gradInput element G,
-- the running sum S (a double, whatever the element type), the norm N and the criterion's margin M.
--   spec.loss:   statements adding f to S, e.g. 'local z = X - Y; S = S + z * z'
--   spec.grad:   an assignment to G, e.g. 'G = 2 * N * (X - Y)'
--   spec.weighted: the criterion's weights (1-D, one per column of a 2-D target) enter as W
--   spec.check(self, input, target): an extra check, run before any computing
--   spec.target(self, input, target): the target as a tensor (for criterions taking numbers)
--   spec.op: for a criterion with device passes of its own op-table name: the passes call
--     backend.of(input).<op>_loss(input, y, w, margin) -> the sum, and
--     <op>_grad(gradInput, input, y, w, norm, margin); the loops here are the CPU ops
--   spec.device: the same passes as tensor ops, for device (CUDA) input: device.terms(self, r,
--     x, y, tmp, margin) fills r with each element's f (unweighted), device.grad(self, g, x, y,
--     tmp, margin) g with each f' (before the norm and weights); tmp is a scratch of x's size
local ffi = require 'ffi'
local check = require 'torch.core.check'
local backend = require 'torch.backend'

local loss = {}

local acc = ffi.new('double[1]')

local function substitute(body, names)
  return (body:gsub('%f[%w_]([SXYWGNM])%f[^%w_]', names))
end

-- The target as a tensor of input's type (a copy in a buffer when its type differs).
function loss.sameType(self, input, target, field)
  if target:type() == input:type() then return target end
  field = field or '_targetBuf'
  self[field] = self[field] or input.new()
  self[field]:resize(target:size()):copy(target)
  return self[field]
end

-- The loops of these criterions read host memory: CUDA tensors get an error, not a crash
-- (unless the criterion's own class sets _deviceKernel: it has a device path).
function loss.checkHost(self, t)
  if not backend.onHost(t) and not rawget(getmetatable(self), '_deviceKernel') then
    check.error(('%s: %s is not supported yet (CPU tensors only)'):format(torch.type(self), t:type()))
  end
end

function loss.checkPair(self, input, target)
  local name = torch.type(self)
  if not torch.isTensor(input) then
    check.error(('%s: input must be a tensor, got %s'):format(name, torch.type(input)))
  end
  if not torch.isTensor(target) then
    check.error(('%s: target must be a tensor, got %s'):format(name, torch.type(target)))
  end
  loss.checkHost(self, input)
  check.floating(name, input)
  if input:nElement() ~= target:nElement() then
    check.error(('%s: input and target size mismatch, %s (%d elements) and %s (%d elements)')
      :format(name, check.sizestr(input), input:nElement(), check.sizestr(target), target:nElement()))
  end
end

-- The weights as a tensor walked alongside target: as they are for a 1-D target, else one per
-- column, repeated down the rows of a 2-D target.
function loss.weightsFor(self, input, target)
  local w = loss.sameType(self, input, self.weights, '_weightsBuf')
  local name = torch.type(self)
  local cols = target:dim() == 1 and target:size(1) or target:size(target:dim())
  if w:nElement() ~= cols or target:dim() > 2 then
    check.error(('%s: weights of size %s do not match target of size %s'):format(
      name, check.sizestr(w), check.sizestr(target)))
  end
  if target:dim() == 1 then return w end
  return w:view(1, cols):expand(target:size(1), cols)
end

local function prepare(self, spec, input, target)
  if spec.target then target = spec.target(self, input, target) end
  loss.checkPair(self, input, target)
  if spec.check then spec.check(self, input, target) end
  local y = loss.sameType(self, input, target)
  local w = spec.weighted and self.weights and loss.weightsFor(self, input, y)
  return y, w
end

-- The loss sum and gradient passes of spec.device (tensor ops), with the CPU ones' arguments
-- after the criterion.
local function devicePasses(device)
  local scratch = require('nn.util.pointwise').scratch
  local function deviceLoss(self, input, y, w, margin)
    local terms = scratch(self, '_terms', input)
    device.terms(self, terms, input, y, scratch(self, '_scratch', input), margin)
    if w then terms:cmul(w) end
    return terms:sum()
  end
  local function deviceGrad(self, gradInput, input, y, w, norm, margin)
    device.grad(self, gradInput, input, y, scratch(self, '_scratch', input), margin)
    gradInput:mul(norm)
    if w then gradInput:cmul(w) end
  end
  return deviceLoss, deviceGrad
end

function loss.define(cls, spec)
  local lossNames = { S = 'v1[0]', X = '$1', Y = '$2', W = '$3', M = 'v2' }
  local gradNames = { G = '$1', X = '$2', Y = '$3', W = '$4', N = 'v1', M = 'v2' }
  local function weightless(body) return (body:gsub('%f[%w_]W%f[^%w_]', '1')) end

  -- The loss sum and the gradient as loops built by a device that compiles them (ops.nn_loop),
  -- with the CPU ops' arguments; nil, nil on a device that does not.
  local function loops(ops)
    local lossK = ops.nn_loop(2, substitute(weightless(spec.loss), lossNames))
    if not lossK then return nil, nil end
    local gradK = ops.nn_loop(3, substitute(weightless(spec.grad), gradNames))
    local lossWK = spec.weighted and ops.nn_loop(3, substitute(spec.loss, lossNames))
    local gradWK = spec.weighted and ops.nn_loop(4, substitute(spec.grad, gradNames))
    local function lossSum(input, y, w, margin)
      acc[0] = 0
      if w then lossWK(input, y, w, acc, margin) else lossK(input, y, acc, margin) end
      return acc[0]
    end
    local function grad(gradInput, input, y, w, norm, margin)
      if w then gradWK(gradInput, input, y, w, norm, margin) else gradK(gradInput, input, y, norm, margin) end
    end
    return lossSum, grad
  end

  -- The passes are ops of every device: spec.op's (<op>_loss(input, y, w, margin) -> the sum,
  -- <op>_grad(gradInput, input, y, w, norm, margin)), or <Criterion>_loss / _grad taking the
  -- criterion first, whose device passes are spec.device's tensor ops.
  local lossSum, grad
  if spec.op then
    local lossName, gradName = spec.op .. '_loss', spec.op .. '_grad'
    backend.define(lossName, function(ops) return (loops(ops)) end)
    backend.define(gradName, function(ops) return select(2, loops(ops)) end)
    lossSum = function(_, input, ...) return backend.of(input)[lossName](input, ...) end
    grad = function(_, gradInput, ...) return backend.of(gradInput)[gradName](gradInput, ...) end
  else
    local prefix = rawget(cls, '__typename'):gsub('^nn%.', '')
    local lossName, gradName = prefix .. '_loss', prefix .. '_grad'
    local deviceLoss, deviceGrad
    if spec.device then
      cls._deviceKernel = true
      deviceLoss, deviceGrad = devicePasses(spec.device)
    end
    backend.define(lossName, function(ops)
      local l = loops(ops)
      return l and function(_, ...) return l(...) end or deviceLoss
    end)
    backend.define(gradName, function(ops)
      local _, g = loops(ops)
      return g and function(_, ...) return g(...) end or deviceGrad
    end)
    lossSum = function(m, input, ...) return backend.of(input)[lossName](m, input, ...) end
    grad = function(m, gradInput, ...) return backend.of(gradInput)[gradName](m, gradInput, ...) end
  end

  function cls:updateOutput(input, target)
    local y, w = prepare(self, spec, input, target)
    local sum = lossSum(self, input, y, w, self.margin)
    if self.sizeAverage then sum = sum / input:nElement() end
    self.output = sum
    return sum
  end

  function cls:updateGradInput(input, target)
    local y, w = prepare(self, spec, input, target)
    local norm = self.sizeAverage and 1 / input:nElement() or 1
    self.gradInput:resizeAs(input)
    grad(self, self.gradInput, input, y, w, norm, self.margin)
    return self.gradInput
  end
end

-- input must be a table of two tensors (the pair criterions); returns them.
function loss.twoTensors(self, input)
  if type(input) ~= 'table' or not torch.isTensor(input[1]) or not torch.isTensor(input[2]) then
    check.error(torch.type(self) .. ': input must be a table of two tensors')
  end
  return input[1], input[2]
end

-- __init(sizeAverage) with sizeAverage true unless false is given.
function loss.initSizeAverage(parent)
  return function(self, sizeAverage)
    parent.__init(self)
    self.sizeAverage = sizeAverage ~= false
  end
end

function loss.checkWeights(name, weights)
  if weights ~= nil and not (torch.isTensor(weights) and weights:dim() == 1) then
    check.error(('%s: weights must be a 1-D tensor'):format(name))
  end
  return weights
end

return loss
