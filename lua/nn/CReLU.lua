-- Concatenated ReLU (Shang et al. 2016): max(x, 0) and max(-x, 0) stacked along the feature
-- dim (dim 1, or dim 2 for a batch: input:dim() == nInputDims + 1), doubling its size.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.util.pointwise'
local CReLU, parent = torch.class('nn.CReLU', 'nn.Module')

-- The passes are the op table's crelu_forward / crelu_backward (the nn_pointwise family).

function CReLU:__init(nInputDims, inplace)
  parent.__init(self)
  self.nInputDims = check.int('nn.CReLU', nInputDims, 'nInputDims', 1, check.MAXDIM)
  self.inplace = inplace or false
end

-- input as samples x features (contiguous), and the output sizes.
function CReLU:layout(input)
  pointwise.checkInput(self, input, true)
  local batched = input:dim() == self.nInputDims + 1
  if not batched and input:dim() ~= self.nInputDims then
    check.error(('nn.CReLU: expected a %dD input or a batch of them, got %s'):format(
      self.nInputDims, check.sizestr(input)))
  end
  local size = input:size()
  local fdim = batched and 2 or 1
  size[fdim] = size[fdim] * 2
  local n = batched and input:size(1) or 1
  return input:contiguous():view(n, -1), size
end

function CReLU:updateOutput(input)
  local x, size = self:layout(input)
  local out = self.output:resize(x:size(1), 2, x:size(2))
  backend.of(x).crelu_forward(self, out, x)
  self.output:resize(size)
  return self.output
end

function CReLU:updateGradInput(input, gradOutput)
  local x, size = self:layout(input)
  check.sameElements('nn.CReLU', self.output:resize(size), gradOutput)
  local g = gradOutput:contiguous():view(x:size(1), 2, x:size(2))
  self.gradInput:resizeAs(input)
  local gi = self.gradInput:view(x:size())
  backend.of(x).crelu_backward(self, gi, x, g:select(2, 1), g:select(2, 2))
  return self.gradInput
end

function CReLU:__tostring__() return 'CReLU()' end
