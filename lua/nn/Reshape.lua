-- The input (copied first when not contiguous) with the given sizes. In batch mode (forced by
-- a trailing true, or guessed when the element count differs or the first dim is 1) the
-- first input dim is kept as the batch dim.
local check = require 'torch.core.check'
local Reshape, parent = torch.class('nn.Reshape', 'nn.Module')

function Reshape:__init(...)
  parent.__init(self)
  local args = { ... }
  local n = select('#', ...)
  if n > 0 and type(args[n]) == 'boolean' then
    self.batchMode = args[n]
    n = n - 1
  end
  self.size = check.sizeArgs('nn.Reshape', 0, unpack(args, 1, n))
  self.nelement = 1
  self.batchsize = torch.LongStorage(#self.size + 1)
  for i = 1, #self.size do
    self.nelement = self.nelement * self.size[i]
    self.batchsize[i + 1] = self.size[i]
  end
end

local function contiguous(self, name, t)
  if t:isContiguous() then return t end
  self[name] = self[name] or t.new()
  return self[name]:resizeAs(t):copy(t)
end

function Reshape:updateOutput(input)
  if not torch.isTensor(input) then
    check.error('nn.Reshape: input must be a tensor, got ' .. torch.type(input))
  end
  input = contiguous(self, '_input', input)
  local single = self.batchMode == false or (self.batchMode == nil
    and input:nElement() == self.nelement and input:size(1) ~= 1)
  local size = self.size
  if not single then
    self.batchsize[1] = input:dim() > 0 and input:size(1) or 0
    size = self.batchsize
  end
  local want = 1
  for i = 1, #size do want = want * size[i] end
  if want ~= input:nElement() then
    local parts = size:totable()
    check.error(('nn.Reshape: input size %s (%d elements) cannot be reshaped to %s'):format(
      check.sizestr(input), input:nElement(), table.concat(parts, 'x')))
  end
  self.output:view(input, size)
  return self.output
end

function Reshape:updateGradInput(input, gradOutput)
  if not torch.isTensor(gradOutput) or gradOutput:nElement() ~= input:nElement() then
    check.error(('nn.Reshape: gradOutput size %s does not match input size %s'):format(
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(input)))
  end
  gradOutput = contiguous(self, '_gradOutput', gradOutput)
  self.gradInput:viewAs(gradOutput, input)
  return self.gradInput
end

function Reshape:__tostring__()
  return ('%s(%s)'):format(torch.type(self), table.concat(self.size:totable(), 'x'))
end

function Reshape:clearState()
  return parent.clearState(self, '_input', '_gradOutput')
end
