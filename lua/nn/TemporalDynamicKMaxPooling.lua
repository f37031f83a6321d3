-- Dynamic k-max pooling (Kalchbrenner et al. 2014) of frames x features (or batch x frames x
-- features) input: for each feature keeps the k largest frames in their original order, with
-- k = max(minK, ceil(factor * frames)).
local check = require 'torch.core.check'
local KMax, parent = torch.class('nn.TemporalDynamicKMaxPooling', 'nn.Module')

function KMax:__init(minK, factor)
  parent.__init(self)
  self.minK = check.int(torch.type(self), minK, 'minK', 1)
  self.factor = check.optNumber(torch.type(self), factor, 'factor') or 0
end

-- Returns the frame dimension and k for input.
function KMax:_k(input)
  local name = torch.type(self)
  if not torch.isTensor(input) or (input:dim() ~= 2 and input:dim() ~= 3) then
    check.error(('%s: expected 2D (frames x features) or 3D (batch mode) input, got %s'):format(name,
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  local dim = input:dim() - 1
  local frames = input:size(dim)
  local k = math.max(self.minK, math.ceil(self.factor * frames))
  if frames < k then
    check.error(('%s: input sequence length (%d) too small for k = %d (input %s)'):format(
      name, frames, k, check.sizestr(input)))
  end
  return dim, k
end

function KMax:updateOutput(input)
  local dim, k = self:_k(input)
  local _, order = input:sort(dim, true)
  self.indices = order:narrow(dim, 1, k):sort(dim)
  self.output = input:gather(dim, self.indices)
  return self.output
end

function KMax:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local dim = self:_k(input)
  if not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(self.indices) then
    check.error(('%s: gradOutput size %s does not match output size %s'):format(torch.type(self),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(self.indices)))
  end
  -- the kept frames are distinct, so scattering the gradient places each once
  self.gradInput:resizeAs(input):zero():scatter(dim, self.indices, gradOutput)
  return self.gradInput
end

function KMax:clearState()
  nn.utils.clear(self, 'indices')
  return parent.clearState(self)
end
