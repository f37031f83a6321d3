-- Runs a module made for nInputDim-dimensional input on input with more dimensions: the
-- leading ones are folded into the first, and unfolded again in the output (nOutputDim dims).
local check = require 'torch.core.check'
local Bottle, parent = torch.class('nn.Bottle', 'nn.Decorator')

function Bottle:__init(module, nInputDim, nOutputDim)
  parent.__init(self, module)
  self.nInputDim = check.optInt('nn.Bottle', nInputDim, 'nInputDim', 1, check.MAXDIM) or 2
  self.nOutputDim = check.optInt('nn.Bottle', nOutputDim, 'nOutputDim', 1, check.MAXDIM) or self.nInputDim
  self.dimDelta = self.nInputDim - self.nOutputDim
  self.inShape = torch.LongStorage(self.nInputDim)
  self.outShape = torch.LongStorage(self.nOutputDim)
end

function Bottle:updateOutput(input)
  local batchDims = input:dim() - self.nInputDim + 1   -- dims 1 .. batchDims are folded
  local inner = self.modules[1]
  if batchDims <= 1 then
    self.output:set(inner:updateOutput(input))
    return self.output
  end
  local size = input:size():totable()
  local folded = 1
  for d = 1, batchDims - 1 do folded = folded * size[d] end
  for d = 1, self.nInputDim do self.inShape[d] = size[batchDims + d - 1] end
  self.inShape[1] = self.inShape[1] * folded
  local output = inner:updateOutput(input:view(self.inShape))
  if output:dim() ~= self.nOutputDim then
    error(('nn.Bottle: the module gave an output of %d dimensions, expected %d')
      :format(output:dim(), self.nOutputDim))
  end
  self.outShape:copy(output:size())
  local outSize = {}
  for d = 1, batchDims - 1 do outSize[d] = size[d] end
  for d = 1, self.nOutputDim do outSize[batchDims + d - 1] = self.outShape[d] end
  outSize[batchDims] = outSize[batchDims] / folded
  self.output:set(output:view(torch.LongStorage(outSize)))
  return self.output
end

function Bottle:updateGradInput(input, gradOutput)
  local inner = self.modules[1]
  local folded = input:dim() > self.nInputDim
  if folded then
    inner:updateGradInput(input:view(self.inShape), gradOutput:view(self.outShape))
  else
    inner:updateGradInput(input, gradOutput)
  end
  if inner.gradInput then
    self.gradInput = self.gradInput or input.new()
    self.gradInput:set(folded and inner.gradInput:viewAs(input) or inner.gradInput)
  else
    self.gradInput = nil
  end
  return self.gradInput
end

-- Parameter updates see the folded input and gradient, as updateOutput's call did.
for _, method in ipairs({ 'accGradParameters', 'accUpdateGradParameters' }) do
  Bottle[method] = function(self, input, gradOutput, arg)
    if input:dim() > self.nInputDim then
      input, gradOutput = input:view(self.inShape), gradOutput:view(self.outShape)
    end
    local inner = self.modules[1]
    inner[method](inner, input, gradOutput, arg)
  end
end
