-- A Linear layer (batch x inputsize -> batch x #partition) restricted to a chosen set of output
-- units (setPartition); resetPartition brings back all of them. The weight rows live in a
-- LookupTable inside self.network = Sequential(ParallelTable(Identity, LookupTable), MM(false, true)),
-- which picks the partition's rows; the bias is 1 x outputsize.
local check = require 'torch.core.check'
local PartialLinear, parent = torch.class('nn.PartialLinear', 'nn.Module')

function PartialLinear:__init(inputsize, outputsize, bias)
  parent.__init(self)
  check.int('nn.PartialLinear', inputsize, 'inputsize', 1)
  check.int('nn.PartialLinear', outputsize, 'outputsize', 1)
  local pick = nn.ParallelTable():add(nn.Identity()):add(nn.LookupTable(outputsize, inputsize))
  self.network = nn.Sequential():add(pick):add(nn.MM(false, true))
  if bias ~= false then
    self.bias = torch.Tensor(1, outputsize):zero()
    self.gradBias = torch.Tensor(1, outputsize):zero()
  end
  self.inputsize, self.outputsize = inputsize, outputsize
  self.allcolumns = torch.range(1, outputsize)
  self:resetPartition()
end

function PartialLinear:_lookup() return self.network:get(1):get(2) end

function PartialLinear:setPartition(indices)
  local n = torch.isTensor(indices) and indices:nElement() or 0
  if n == 0 or indices:dim() ~= 1 or not (indices:min() >= 1 and indices:max() <= self.outputsize) then
    check.error(('nn.PartialLinear: partition must be a non-empty vector of indices in [1, %d], got %s'):format(
      self.outputsize, torch.isTensor(indices) and check.sizestr(indices) or torch.type(indices)))
  end
  self.partition = indices:type(self.allcolumns:type())
  return self
end

function PartialLinear:resetPartition()
  self.partition = self.allcolumns
  return self
end

function PartialLinear:parameters()
  local lookup = self:_lookup()
  return { lookup.weight, self.bias }, { lookup.gradWeight, self.gradBias }
end

local function checkInput(self, input)
  if not torch.isTensor(input) or input:dim() ~= 2 or input:size(2) ~= self.inputsize then
    check.error(('nn.PartialLinear: expected a batch x %d input, got %s'):format(self.inputsize,
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
end

function PartialLinear:updateOutput(input)
  checkInput(self, input)
  self.output = self.network:forward({ input, self.partition })
  if self.bias then
    self.output:add(self.bias:index(2, self.partition:long()):expandAs(self.output))
  end
  return self.output
end

function PartialLinear:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  checkInput(self, input)
  self.gradInput = self.network:updateGradInput({ input, self.partition }, gradOutput)[1]
  return self.gradInput
end

function PartialLinear:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  self.network:accGradParameters({ input, self.partition }, gradOutput, scale)
  if self.bias then
    local sums = gradOutput:sum(1):mul(scale)  -- 1 x #partition
    self.gradBias:indexAdd(2, self.partition:long(), sums)
  end
end

-- Updates in place with -lr times this input's gradients.
function PartialLinear:accUpdateGradParameters(input, gradOutput, lr)
  local lookup = self:_lookup()
  local gradWeight, gradBias = lookup.gradWeight, self.gradBias
  lookup.gradWeight, self.gradBias = lookup.weight, self.bias
  self:accGradParameters(input, gradOutput, -lr)
  lookup.gradWeight, self.gradBias = gradWeight, gradBias
end

function PartialLinear:sharedAccUpdateGradParameters(input, gradOutput, lr)
  self:defaultAccUpdateGradParameters(input, gradOutput, lr)
end

function PartialLinear:zeroGradParameters()
  self.network:zeroGradParameters()
  if self.gradBias then self.gradBias:zero() end
end

function PartialLinear:updateParameters(learningRate)
  self.network:updateParameters(learningRate)
  if self.bias then self.bias:add(-learningRate, self.gradBias) end
end

function PartialLinear:__tostring__()
  return ('%s(%d -> %d)%s'):format(torch.type(self), self.inputsize, self.outputsize,
    self.bias and '' or ' without bias')
end
