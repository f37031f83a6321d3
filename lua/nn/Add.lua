-- x + b, b a learned vector of inputSize elements (one scalar with scalar = true), added to
-- the input or to each sample of a batch.
local check = require 'torch.core.check'
local Add, parent = torch.class('nn.Add', 'nn.Module')

function Add:__init(inputSize, scalar)
  parent.__init(self)
  local size = scalar and 1 or check.int('nn.Add', inputSize, 'inputSize', 0)
  self.scalar = scalar
  self.bias = torch.Tensor(size)
  self.gradBias = torch.Tensor(size)
  self._ones = torch.Tensor { 1 }
  self:reset()
end

function Add:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.bias:size(1))
  self.bias:uniform(-stdv, stdv)
end

-- The batch size when input is a batch of bias-sized samples, nil when it is one sample.
local function batchSize(self, input)
  check.tensorOf('nn.Add', input, 'input')
  local n = self.bias:nElement()
  if self.scalar or input:nElement() == n then return nil end
  if input:dim() < 2 or input:nElement() ~= input:size(1) * n then
    check.error(('nn.Add: input size %s does not match bias size %d (or a batch of it)'):format(
      check.sizestr(input), n))
  end
  local b = input:size(1)
  if self._ones:nElement() ~= b then self._ones:resize(b):fill(1) end
  return b
end

function Add:updateOutput(input)
  local b = batchSize(self, input)
  self.output:resizeAs(input):copy(input)
  if self.scalar then
    self.output:add(self.bias[1])
  elseif not b then
    self.output:add(self.bias:view(input:size()))
  else
    self.output:view(b, -1):addr(1, self._ones, self.bias)
  end
  return self.output
end

function Add:updateGradInput(input, gradOutput)
  check.sameElements('nn.Add', input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  return self.gradInput
end

function Add:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local b = batchSize(self, input)
  check.sameElements('nn.Add', input, gradOutput)
  if self.scalar then
    self.gradBias[1] = self.gradBias[1] + scale * gradOutput:sum()
  elseif not b then
    self.gradBias:add(scale, gradOutput:contiguous():view(self.gradBias:size()))
  else
    self.gradBias:addmv(scale, gradOutput:contiguous():view(b, -1):t(), self._ones)
  end
end
