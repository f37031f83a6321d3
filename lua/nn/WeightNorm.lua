-- Weight normalization (Salimans & Kingma 2016) around any module with a weight: the weight is
-- rebuilt as w = g * v / ||v|| for each output unit, and v and g are the trained parameters.
-- outputDim names the weight dimension of the output units; the others are flattened, so the
-- 2-D views v, gradV are nOutput x (the product of the other weight sizes); g, gradG nOutput x 1.
local check = require 'torch.core.check'
local WeightNorm, parent = torch.class('nn.WeightNorm', 'nn.Decorator')

-- Added to ||v||^2 so that a zero row keeps a finite norm.
local NORM_EPS = 1e-4

function WeightNorm:__init(module, outputDim)
  parent.__init(self, module)
  if not (torch.isTensor(module.weight) and torch.isTensor(module.gradWeight)) then
    check.error('nn.WeightNorm: the wrapped module must have a weight and a gradWeight')
  end
  self.weight, self.gradWeight = module.weight, module.gradWeight
  self.bias, self.gradBias = module.bias, module.gradBias
  self.outputDim = check.optInt('nn.WeightNorm', outputDim, 'outputDim', 1, check.MAXDIM) or 1
  local nd = self.weight:dim()
  if self.outputDim < 1 or self.outputDim > nd then
    check.error(('nn.WeightNorm: outputDim %d out of range for a %dD weight of size %s'):format(
      self.outputDim, nd, check.sizestr(self.weight)))
  end
  self.weightSize = self.weight:size()
  local nOut = self.weight:size(self.outputDim)
  local nOther = nOut == 0 and 0 or self.weight:nElement() / nOut
  self.viewIn = torch.LongStorage({ nOut, nOther })
  -- the weight's sizes with outputDim moved to the front
  self.viewOut = self:permuteIn(self.weight):size()
  self.v = self.weight.new(nOut, nOther)
  self.g = self.weight.new(nOut, 1)
  self.gradV = self.weight.new(nOut, nOther):zero()
  self.gradG = self.weight.new(nOut, 1):zero()
  self._norm = self.weight.new(nOut)
  self._scale = self.weight.new(nOut)
  self:resetInit()
end

-- t with dimension outputDim moved to the front (the other dimensions keep their order).
function WeightNorm:permuteIn(t)
  for i = self.outputDim - 1, 1, -1 do t = t:transpose(i, i + 1) end
  return t
end

-- The inverse of permuteIn.
function WeightNorm:permuteOut(t)
  for i = 1, self.outputDim - 1 do t = t:transpose(i, i + 1) end
  return t
end

-- v ~ N(0, 2 / fan-in), g = ||v|| (so the weight starts as v), bias zero.
function WeightNorm:resetInit()
  self.v:normal(0, math.sqrt(2 / math.max(self.viewIn[2], 1)))
  self.g:norm(self.v, 2, 2)
  if self.bias then self.bias:zero() end
  return self
end

-- weight = g * v / ||v||, written into the wrapped module's weight.
function WeightNorm:updateWeight()
  local nOut, nOther = self.viewIn[1], self.viewIn[2]
  self._norm:norm(self.v, 2, 2):pow(2):add(NORM_EPS):sqrt()
  self._scale:cdiv(self.g, self._norm)
  self._w = self._w or self.v.new()
  self._w:resizeAs(self.v):cmul(self.v, self._scale:view(nOut, 1):expand(nOut, nOther))
  self.weight:copy(self:permuteOut(self._w:view(self.viewOut)))
end

function WeightNorm:updateOutput(input)
  if self.train ~= false then self:updateWeight() end
  return parent.updateOutput(self, input)
end

function WeightNorm:evaluate()
  if self.train ~= false then self:updateWeight() end
  parent.evaluate(self)
end

-- The wrapped module's weight gradient G (taken alone, its gradWeight zeroed first) becomes
--   gradG += sum_j G_j v_j / ||v||,   gradV += (g / ||v||) (G - (gradG_step / ||v||) v)
-- per output unit; gradWeight is left holding gradV in the weight's layout.
function WeightNorm:accGradParameters(input, gradOutput, scale)
  local module = self.modules[1]
  self.gradWeight:zero()
  module:accGradParameters(input, gradOutput, scale or 1)
  local nOut, nOther = self.viewIn[1], self.viewIn[2]
  local function rows(t) return t:view(nOut, 1):expand(nOut, nOther) end
  self._gw = self._gw or self.v.new()
  self._gw:resize(self.viewOut):copy(self:permuteIn(self.gradWeight))
  local gw = self._gw:view(nOut, nOther)
  self._step = self._step or self.v.new()
  self._tmp = self._tmp or self.v.new()
  -- dL/dg = G . v / ||v||
  self._tmp:resizeAs(gw):cmul(gw, self.v):cdiv(rows(self._norm))
  self._step:sum(self._tmp, 2)
  self.gradG:add(self._step)
  -- dL/dv = (g / ||v||) G - (g / ||v||^2) (dL/dg) v
  self._tmp:cmul(self.v, rows(self._scale)):cdiv(rows(self._norm)):cmul(rows(self._step))
  self.gradV:add(gw:cmul(rows(self._scale))):add(-1, self._tmp)
  self.gradWeight:copy(self:permuteOut(self.gradV:view(self.viewOut)))
end

function WeightNorm:zeroGradParameters()
  self.modules[1]:zeroGradParameters()
  self.gradV:zero()
  self.gradG:zero()
end

function WeightNorm:updateParameters(learningRate)
  self.modules[1]:updateParameters(learningRate)
  self.v:add(-learningRate, self.gradV)
  self.g:add(-learningRate, self.gradG)
end

function WeightNorm:parameters()
  if self.bias then return { self.v, self.g, self.bias }, { self.gradV, self.gradG, self.gradBias } end
  return { self.v, self.g }, { self.gradV, self.gradG }
end

function WeightNorm:clearState()
  nn.utils.clear(self, '_w', '_gw', '_step', '_tmp')
  return parent.clearState(self)
end

-- Saved as torch7 saves it, without the weight and its gradient (they follow from v, g and
-- gradV) but with weightSize; read rebuilds them.
function WeightNorm:write(file)
  local module, weight, gradWeight = self.modules[1], self.weight, self.gradWeight
  self.weightSize = self.weightSize or weight:size()
  self.weight, self.gradWeight, module.weight, module.gradWeight = nil, nil, nil, nil
  local ok, err = pcall(parent.write, self, file)
  self.weight, self.gradWeight, module.weight, module.gradWeight = weight, gradWeight, weight, gradWeight
  if not ok then error(err, 0) end
end

function WeightNorm:read(file, version)
  parent.read(self, file, version)
  -- derived buffers, made afresh: torch7's files and hostile ones may lack them
  local proto = torch.isTensor(self.v) and self.v or torch.isTensor(self.weight) and self.weight or torch.Tensor()
  self._norm, self._scale = proto.new(), proto.new()
  if self.weight then return end
  -- the weight is rebuilt from v, g and weightSize (files are untrusted: they are checked)
  local v, size, module = self.v, self.weightSize, type(self.modules) == 'table' and self.modules[1]
  local ok = type(module) == 'table' and torch.isStorage(size) and torch.isStorage(self.viewOut)
    and torch.isStorage(self.viewIn) and self.viewIn:size() == 2
    and torch.isTensor(v) and torch.isTensor(self.g) and torch.isTensor(self.gradG) and torch.isTensor(self.gradV)
    and v:nElement() <= (v:storage() and v:storage():size() or 0)
    and type(self.outputDim) == 'number' and self.outputDim >= 1 and self.outputDim <= size:size()
  local n = 1
  for i = 1, ok and size:size() or 0 do n = n * size[i] end
  if not ok or n ~= v:nElement() then
    check.error('nn.WeightNorm: the saved v, g, gradG, gradV, viewIn, viewOut, outputDim and weightSize do not fit together')
  end
  local nOut, nOther = self.viewIn[1], self.viewIn[2]
  -- torch7 leaves g and gradG 1-D or nOut x 1, and gradV 2-D or in the weight's layout
  self.g, self.gradG = self.g:view(nOut, 1), self.gradG:view(nOut, 1)
  self.gradV = self.gradV:view(nOut, nOther)
  self.weight, self.gradWeight = self.v.new(self.weightSize), self.v.new(self.weightSize)
  module.weight, module.gradWeight = self.weight, self.gradWeight
  self:updateWeight()
  self.gradWeight:copy(self:permuteOut(self.gradV:view(self.viewOut)))
end
