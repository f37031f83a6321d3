-- x / ||x||_p for a vector or each row of a matrix, with ||x||_p = (sum |x|^p + eps)^(1/p)
-- (max |x| + eps for p = math.huge).
local check = require 'torch.core.check'
local extremum = require 'nn.util.extremum'
local Normalize, parent = torch.class('nn.Normalize', 'nn.Module')

function Normalize:__init(p, eps)
  parent.__init(self)
  self.p = check.number('nn.Normalize', p, 'p')
  if not (p > 0) then check.error(('nn.Normalize: %s-norm not supported'):format(p)) end
  self.eps = check.optNumber('nn.Normalize', eps, 'eps') or 1e-10
end

local function rows(input)
  if not torch.isTensor(input) or input:dim() < 1 or input:dim() > 2 then
    check.error(('nn.Normalize: expected a vector or a matrix, got %s'):format(
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  return input:dim() == 1 and input:view(1, -1) or input
end

function Normalize:updateOutput(input)
  local x = rows(input)
  self.norm = self.norm or x.new()
  self.buffer = self.buffer or x.new()
  if self.p == math.huge then
    self._indices = self._indices or extremum.indexTensor(x)
    torch.max(self.norm, self._indices, self.buffer:abs(x), 2)
    self.norm:add(self.eps)
  else
    self.normp = self.normp or x.new()
    torch.sum(self.normp, self.buffer:abs(x):pow(self.p), 2):add(self.eps)
    self.norm:pow(self.normp, 1 / self.p)
  end
  self.output:resizeAs(x):cdiv(x, self.norm:expandAs(x))
  self.output = self.output:view(input:size())
  return self.output
end

-- gradInput = gradOutput / n - d(n)/dx * sum(gradOutput * x) / n^2, per row, where
-- dn/dx = |x|^(p-1) sign(x) * n / normp (for p = inf: sign(x) at the max, 0 elsewhere).
function Normalize:updateGradInput(input, gradOutput)
  local x = rows(input)
  check.sameElements('nn.Normalize', input, gradOutput)
  local g = gradOutput:contiguous():view(x:size())
  self.dot = self.dot or x.new()
  self.cross = self.cross or x.new()
  self.cross:resizeAs(x):cmul(g, x)
  torch.sum(self.dot, self.cross, 2)
  local dn = self.buffer:resizeAs(x)
  if self.p == math.huge then
    dn:zero()
    self.cross:resize(x:size(1), 1):gather(x, 2, self._indices):sign()
    dn:scatter(2, self._indices, self.cross)
    self.dot:cdiv(self.norm):cdiv(self.norm)
  else
    -- |x|^(p-2) * x, with eps keeping |x|^(p-2) finite at 0 when p < 2
    if self.p < 2 then dn:abs(x):add(self.eps):pow(self.p - 2):cmul(x)
    else dn:abs(x):pow(self.p - 2):cmul(x) end
    self.dot:cdiv(self.normp):cdiv(self.norm)
  end
  self.gradInput:resizeAs(x):cmul(dn, self.dot:expandAs(x)):mul(-1)
  self.gradInput:add(self.cross:resizeAs(x):cdiv(g, self.norm:expandAs(x)))
  self.gradInput = self.gradInput:view(input:size())
  return self.gradInput
end

function Normalize:__tostring__()
  local form = self.p % 1 == 0 and '%s(%d)' or '%s(%f)'
  return form:format(torch.type(self), self.p)
end

function Normalize:type(name, cache)  -- _indices stays a LongTensor
  if name then self._indices = nil end
  return parent.type(self, name, cache)
end

function Normalize:clearState()
  return parent.clearState(self, 'norm', 'normp', 'buffer', 'dot', 'cross', '_indices')
end
