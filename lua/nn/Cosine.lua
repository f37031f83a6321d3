-- y_j = <w_j, x> / (||w_j|| ||x||), the cosine similarity of x with each row w_j of weight
-- (outputSize x inputSize), for a vector or each row of a batch. 1e-12 keeps norms nonzero.
local check = require 'torch.core.check'
local Cosine, parent = torch.class('nn.Cosine', 'nn.Module')

function Cosine:__init(inputSize, outputSize)
  parent.__init(self)
  check.int(torch.type(self), inputSize, 'inputSize', 0)
  check.int(torch.type(self), outputSize, 'outputSize', 0)
  self.weight = torch.Tensor(outputSize, inputSize)
  self.gradWeight = torch.Tensor(outputSize, inputSize)
  self:reset()
end

function Cosine:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.weight:size(1))
  self.weight:uniform(-stdv, stdv)
end

function Cosine:rows(input)
  if not torch.isTensor(input) or (input:dim() ~= 1 and input:dim() ~= 2)
      or input:size(input:dim()) ~= self.weight:size(2) then
    check.error(('nn.Cosine: expected a vector of %d or a batch of them, got %s'):format(
      self.weight:size(2), torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  return input:dim() == 1 and input:view(1, -1) or input
end

-- _wn (1 x k) and _xn (b x 1): the norms of the templates and of the inputs.
function Cosine:norms(x)
  self._wn = self._wn or x.new()
  self._xn = self._xn or x.new()
  self._wn:norm(self.weight, 2, 2):add(1e-12)
  self._xn:norm(x, 2, 2):add(1e-12)
  return self._wn:view(1, -1), self._xn
end

function Cosine:updateOutput(input)
  local x = self:rows(input)
  local wn, xn = self:norms(x)
  local b, k = x:size(1), self.weight:size(1)
  self.output:resize(b, k)
  torch.mm(self.output, x, self.weight:t())
  self.output:cdiv(wn:expand(b, k)):cdiv(xn:expand(b, k))
  if input:dim() == 1 then self.output = self.output:view(k) end
  return self.output
end

-- gradOutput as b x k, and the output as b x k.
function Cosine:grads(x, gradOutput)
  local b, k = x:size(1), self.weight:size(1)
  if gradOutput:nElement() ~= b * k then
    check.error(('nn.Cosine: gradOutput size %s does not match output size %s'):format(
      check.sizestr(gradOutput), check.sizestr(self.output)))
  end
  return gradOutput:contiguous():view(b, k), self.output:view(b, k)
end

-- dy_j/dx = w_j / (|w_j| |x|) - y_j x / |x|^2.
function Cosine:updateGradInput(input, gradOutput)
  local x = self:rows(input)
  local g, y = self:grads(x, gradOutput)
  local wn, xn = self:norms(x)
  local b, n = x:size(1), x:size(2)
  self._gw = self._gw or x.new()
  self._gw:resizeAs(g):cdiv(g, wn:expandAs(g))                  -- g_j / |w_j|
  self.gradInput:resize(b, n)
  torch.mm(self.gradInput, self._gw, self.weight)
  self.gradInput:cdiv(xn:expand(b, n))
  self._gy = self._gy or x.new()
  torch.sum(self._gy, self._gw:cmul(g, y), 2)                    -- sum_j g_j y_j
  self._gy:cdiv(xn):cdiv(xn)
  self._xy = self._xy or x.new()
  self.gradInput:add(-1, self._xy:resizeAs(x):cmul(x, self._gy:expand(b, n)))
  self.gradInput = self.gradInput:view(input:size())
  return self.gradInput
end

-- dy_j/dw_j = x / (|w_j| |x|) - y_j w_j / |w_j|^2.
function Cosine:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local x = self:rows(input)
  local g, y = self:grads(x, gradOutput)
  local wn, xn = self:norms(x)
  local b, k = g:size(1), g:size(2)
  self._gw = self._gw or x.new()
  self._gw:resizeAs(g):cdiv(g, xn:expand(b, k))                  -- g_j / |x|
  self._dw = self._dw or x.new()
  self._dw:resize(k, x:size(2))
  torch.mm(self._dw, self._gw:t(), x)
  self._dw:cdiv(self._wn:expandAs(self._dw))
  self.gradWeight:add(scale, self._dw)
  self._gy = self._gy or x.new()
  torch.sum(self._gy, self._gw:cmul(g, y), 1)                    -- sum_b g_j y_j, 1 x k
  self._gy:cdiv(wn):cdiv(wn)
  self.gradWeight:add(-scale, self._dw:cmul(self.weight, self._gy:view(k, 1):expandAs(self.weight)))
end

function Cosine:clearState()
  return parent.clearState(self, '_wn', '_xn', '_gw', '_gy', '_dw', '_xy')
end
