-- Concatenated ReLU (Shang et al. 2016): max(x, 0) and max(-x, 0) stacked along the feature
-- dim (dim 1, or dim 2 for a batch: input:dim() == nInputDims + 1), doubling its size.
local check = require 'torch.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.kernels.pointwise'
local CReLU, parent = torch.class('nn.CReLU', 'nn.Module')

local positive = backend.cpu.kernel(2, 'local x = $2; $1 = x > 0 and x or 0')
local negative = backend.cpu.kernel(2, 'local x = $2; $1 = x < 0 and -x or 0')
local backward = backend.cpu.kernel(4, 'local x = $2; $1 = (x > 0 and $3 or 0) - (x < 0 and $4 or 0)')

function CReLU:__init(nInputDims, inplace)
  parent.__init(self)
  self.nInputDims = check.int('nn.CReLU', nInputDims, 'nInputDims', 1, check.MAXDIM)
  self.inplace = inplace or false
end

-- input as samples x features (contiguous), and the output sizes.
function CReLU:layout(input)
  pointwise.checkInput(self, input)
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
  positive(out:select(2, 1), x)
  negative(out:select(2, 2), x)
  self.output:resize(size)
  return self.output
end

function CReLU:updateGradInput(input, gradOutput)
  local x, size = self:layout(input)
  check.sameElements('nn.CReLU', self.output:resize(size), gradOutput)
  local g = gradOutput:contiguous():view(x:size(1), 2, x:size(2))
  self.gradInput:resizeAs(input)
  backward(self.gradInput:view(x:size()), x, g:select(2, 1), g:select(2, 2))
  return self.gradInput
end

function CReLU:__tostring__() return 'CReLU()' end
