-- Feeds the input to every child and joins their outputs along `dimension`.
local check = require 'torch.core.check'
local Concat, parent = torch.class('nn.Concat', 'nn.Container')

function Concat:__init(dimension)
  parent.__init(self)
  self.outputSize = torch.LongStorage()
  self.dimension = check.int(torch.type(self), dimension, 'dimension', 1, check.MAXDIM)
end

-- The outputs must agree in every dimension but `dimension` (DepthConcat pads instead).
function Concat:_checkJoinable(i, out)
  local size, dim = self.outputSize, self.dimension
  local ok = out:dim() == #size
  for d = 1, ok and #size or 0 do
    if d ~= dim and out:size(d) ~= size[d] then ok = false end
  end
  if not ok then
    error(('%s: output of module %d has size %s, which cannot be joined along dimension %d to size %s')
      :format(torch.type(self), i, table.concat(out:size():totable(), 'x'), dim,
        table.concat(size:totable(), 'x')))
  end
end

-- Grows outputSize by one child's output: its size along `dimension` adds up.
function Concat:_growOutputSize(i, out)
  local dim = self.dimension
  if out:dim() < dim then
    error(('%s: output of module %d has %d dimensions, cannot join along dimension %d')
      :format(torch.type(self), i, out:dim(), dim))
  end
  if i == 1 then
    self.outputSize:resize(out:dim()):copy(out:size())
  else
    self:_checkJoinable(i, out)
    self.outputSize[dim] = self.outputSize[dim] + out:size(dim)
  end
end

-- The part of t (the output or its gradient) belonging to a child whose output is out.
function Concat:windowNarrow(t, out, offset)
  return t:narrow(self.dimension, offset, out:size(self.dimension))
end

function Concat:updateOutput(input)
  self.outputSize = self.outputSize or torch.LongStorage()
  local outs = {}
  for i, m in ipairs(self.modules) do
    outs[i] = self:rethrowErrors(m, i, 'updateOutput', input)
    self:_growOutputSize(i, outs[i])
  end
  self.output:resize(self.outputSize)
  self:_fillPadding()
  local offset = 1
  for _, out in ipairs(outs) do
    self:windowNarrow(self.output, out, offset):copy(out)
    offset = offset + out:size(self.dimension)
  end
  return self.output
end

function Concat:_fillPadding() end

-- Each child's part of gradOutput, in order, for the per-child calls below.
local function gradOutputParts(self, gradOutput)
  local offset, parts = 1, {}
  for i, m in ipairs(self.modules) do
    parts[i] = self:windowNarrow(gradOutput, m.output, offset)
    offset = offset + m.output:size(self.dimension)
  end
  return function(i) return parts[i] end
end

function Concat:updateGradInput(input, gradOutput)
  return self:_sumGradInputs('updateGradInput', input, gradOutputParts(self, gradOutput))
end

function Concat:backward(input, gradOutput, scale)
  return self:_sumGradInputs('backward', input, gradOutputParts(self, gradOutput), scale or 1)
end

local function eachChild(method)
  return function(self, input, gradOutput, arg)
    local part = gradOutputParts(self, gradOutput)
    for i, m in ipairs(self.modules) do self:rethrowErrors(m, i, method, input, part(i), arg) end
  end
end
Concat.accGradParameters = eachChild('accGradParameters')
Concat.accUpdateGradParameters = eachChild('accUpdateGradParameters')

Concat.__tostring__ = nn.Container._branchesToString
