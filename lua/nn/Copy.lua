-- Converts the input to outtype (and the gradient back to intype). Without forceCopy and
-- with equal types the output shares the input. dontCast keeps the types under :type().
local check = require 'torch.core.check'
local Copy, parent = torch.class('nn.Copy', 'nn.Module')

function Copy:__init(intype, outtype, forceCopy, dontCast)
  intype = check.optTensorType('nn.Copy', intype, 'intype') or torch.Tensor.__typename
  outtype = check.optTensorType('nn.Copy', outtype, 'outtype') or torch.Tensor.__typename
  self.dontCast = dontCast
  parent.__init(self)
  self.gradInput = torch.getmetatable(intype).new()
  self.output = torch.getmetatable(outtype).new()
  -- the flag is not named share: that field would hide Module:share (OpenNMT clones nets with Copy in them)
  self.sharesInput = not forceCopy and intype == outtype
end

function Copy:updateOutput(input)
  check.tensorOf('nn.Copy', input, 'input')
  if self.sharesInput then return self.output:set(input) end
  self.output:resize(input:size()):copy(input)
  return self.output
end

function Copy:updateGradInput(input, gradOutput)
  check.sameElements('nn.Copy', input, gradOutput)
  if self.sharesInput then return self.gradInput:set(gradOutput) end
  self.gradInput:resize(gradOutput:size()):copy(gradOutput)
  return self.gradInput
end

function Copy:type(type, tensorCache)
  if type and self.dontCast then return self end
  return parent.type(self, type, tensorCache)
end
