-- y_k = x1^T W_k x2 + b_k for a batch of pairs {x1 (batch x inputSize1), x2 (batch x inputSize2)};
-- weight is outputSize x inputSize1 x inputSize2. The products run as matrix multiplies.
local check = require 'torch.core.check'
local Bilinear, parent = torch.class('nn.Bilinear', 'nn.Module')

function Bilinear:__init(inputSize1, inputSize2, outputSize, bias)
  check.int('nn.Bilinear', inputSize1, 'inputSize1', 1)
  check.int('nn.Bilinear', inputSize2, 'inputSize2', 1)
  check.int('nn.Bilinear', outputSize, 'outputSize', 1)
  parent.__init(self)
  self.weight = torch.Tensor(outputSize, inputSize1, inputSize2)
  self.gradWeight = torch.Tensor(outputSize, inputSize1, inputSize2)
  if bias ~= false then
    self.bias = torch.Tensor(outputSize)
    self.gradBias = torch.Tensor(outputSize)
  end
  self.gradInput = { torch.Tensor(), torch.Tensor() }
  self:reset()
end

function Bilinear:reset(stdv)
  if stdv then
    assert(type(stdv) == 'number' and stdv > 0, 'standard deviation should be a positive number')
    stdv = stdv * math.sqrt(3)
  else
    stdv = 1 / math.sqrt(self.weight:size(2))
  end
  self.weight:uniform(-stdv, stdv)
  if self.bias then self.bias:uniform(-stdv, stdv) end
  return self
end

function Bilinear:operands(input)
  local k, n1, n2 = self.weight:size(1), self.weight:size(2), self.weight:size(3)
  if type(input) ~= 'table' or #input ~= 2 or not torch.isTensor(input[1])
      or not torch.isTensor(input[2]) then
    check.error('nn.Bilinear: input should be a table containing two data Tensors')
  end
  local x1, x2 = input[1], input[2]
  if x1:dim() ~= 2 or x2:dim() ~= 2 or x1:size(1) ~= x2:size(1) or x1:size(2) ~= n1
      or x2:size(2) ~= n2 then
    check.error(('nn.Bilinear: expected inputs batch x %d and batch x %d, got %s and %s'):format(
      n1, n2, check.sizestr(x1), check.sizestr(x2)))
  end
  return x1, x2, x1:size(1), k, n1, n2
end

-- _xw = x1 W_k for every sample and k: batch x k x n2.
function Bilinear:leftProducts(x1, b, k, n1, n2)
  self._w12 = self._w12 or x1.new()
  self._w12:resize(n1, k, n2):copy(self.weight:transpose(1, 2))
  self._xw = self._xw or x1.new()
  self._xw:resize(b, k * n2)
  torch.mm(self._xw, x1, self._w12:view(n1, k * n2))
  return self._xw:view(b, k, n2)
end

function Bilinear:updateOutput(input)
  local x1, x2, b, k, n1, n2 = self:operands(input)
  local xw = self:leftProducts(x1, b, k, n1, n2)
  self.output:resize(b, k, 1)
  torch.bmm(self.output, xw, x2:contiguous():view(b, n2, 1))
  self.output:resize(b, k)
  if self.bias then self.output:add(self.bias:view(1, k):expand(b, k)) end
  return self.output
end

function Bilinear:checkGradOutput(gradOutput, b, k)
  if not torch.isTensor(gradOutput) or gradOutput:dim() ~= 2 or gradOutput:size(1) ~= b
      or gradOutput:size(2) ~= k then
    check.error(('nn.Bilinear: gradOutput size %s does not match output size %dx%d'):format(
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput), b, k))
  end
  return gradOutput:contiguous()
end

-- dx1 = sum_k g_k W_k x2, dx2 = sum_k g_k W_k^T x1.
function Bilinear:updateGradInput(input, gradOutput)
  local x1, x2, b, k, n1, n2 = self:operands(input)
  local g = self:checkGradOutput(gradOutput, b, k):view(b, 1, k)
  local xw = self:leftProducts(x1, b, k, n1, n2)
  local g1, g2 = self.gradInput[1], self.gradInput[2]
  g2:resize(b, 1, n2)
  torch.bmm(g2, g, xw)
  g2:resize(b, n2)
  self._wx = self._wx or x1.new()
  self._wx:resize(b, k * n1)
  torch.mm(self._wx, x2, self.weight:view(k * n1, n2):t())
  g1:resize(b, 1, n1)
  torch.bmm(g1, g, self._wx:view(b, k, n1))
  g1:resize(b, n1)
  return self.gradInput
end

-- dW_k = sum over the batch of g_k x1 x2^T.
function Bilinear:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local x1, x2, b, k, n1, n2 = self:operands(input)
  local g = self:checkGradOutput(gradOutput, b, k)
  self._gx = self._gx or x1.new()
  self._gx:resize(b, k, n1):cmul(g:view(b, k, 1):expand(b, k, n1), x1:view(b, 1, n1):expand(b, k, n1))
  self.gradWeight:view(k * n1, n2):addmm(scale, self._gx:view(b, k * n1):t(), x2)
  if self.bias then self.gradBias:add(scale, torch.sum(g, 1):view(k)) end
end

function Bilinear:__tostring__()
  return ('%s(%dx%d -> %d) %s'):format(torch.type(self), self.weight:size(2), self.weight:size(3),
    self.weight:size(1), self.bias and '' or ' without bias')
end

function Bilinear:clearState()
  return parent.clearState(self, '_w12', '_xw', '_wx', '_gx')
end
