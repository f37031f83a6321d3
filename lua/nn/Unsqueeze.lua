-- Inserts a size-1 dim at pos (after the batch dim when the input has more than numInputDims).
local check = require 'torch.core.check'
local Unsqueeze, parent = torch.class('nn.Unsqueeze', 'nn.Module')

function Unsqueeze:__init(pos, numInputDims)
  parent.__init(self)
  if pos == nil then error('nn.Unsqueeze: the position to insert singleton dim not specified', 2) end
  self.pos = check.int('nn.Unsqueeze', pos, 'pos', 1, check.MAXDIM)
  self:setNumInputDims(numInputDims)
end

function Unsqueeze:setNumInputDims(numInputDims)
  self.numInputDims = check.optInt('nn.Unsqueeze', numInputDims, 'numInputDims', 0, check.MAXDIM)
  return self
end

function Unsqueeze:position(input)
  check.tensorOf('nn.Unsqueeze', input, 'input')
  local nd = input:dim()
  local offset = nd - (self.numInputDims or nd)
  local pos = self.pos + offset
  if offset < 0 or pos < 1 or pos > nd + 1 then
    check.error(('nn.Unsqueeze: invalid position %d for %s input (numInputDims %s)'):format(
      self.pos, check.sizestr(input), tostring(self.numInputDims)))
  end
  return pos
end

function Unsqueeze:updateOutput(input)
  local pos = self:position(input)
  local sizes = input:size():totable()
  local strides = input:stride():totable()
  table.insert(sizes, pos, 1)
  table.insert(strides, pos, pos <= #strides and strides[pos] * input:size(pos) or 1)
  self.output:set(input:storage(), input:storageOffset(), torch.LongStorage(sizes),
    torch.LongStorage(strides))
  return self.output
end

function Unsqueeze:updateGradInput(input, gradOutput)
  check.sameElements('nn.Unsqueeze', input, gradOutput)
  self.gradInput:view(gradOutput:contiguous(), input:size())
  return self.gradInput
end

function Unsqueeze:__tostring__()
  return ('%s(dim %d)'):format(torch.type(self), self.pos)
end
