-- Dropout of whole feature maps: one Bernoulli draw per plane of a C x H x W input (or per
-- sample and plane of a batch), shared by every position of that plane. As torch7's, the
-- kept planes are not rescaled while training; evaluation scales by (1-p) instead (unless
-- stochasticInference keeps the noise). SpatialDropout takes 3D/4D inputs,
-- VolumetricDropout (a subclass) 4D/5D.
local check = require 'torch.core.check'
local SpatialDropout, parent = torch.class('nn.SpatialDropout', 'nn.Module')

SpatialDropout.planeDims = 3  -- dims of one sample: planes x h x w

function SpatialDropout:__init(p, stochasticInference)
  parent.__init(self)
  self.p = check.optNumber(torch.type(self), p, 'p') or 0.5
  self.train = true
  self.stochastic_inference = stochasticInference or false
  self.noise = torch.Tensor()
end

-- The noise shape: the input's with every dim after the plane dim set to 1.
function SpatialDropout:noiseSize(input)
  local nd, k = input:dim(), self.planeDims
  if nd ~= k and nd ~= k + 1 then
    check.error(('%s: expected a %dD or %dD input, got %s'):format(torch.type(self), k, k + 1,
      check.sizestr(input)))
  end
  local sizes = input:size()
  for d = nd - k + 2, nd do sizes[d] = 1 end
  return sizes
end

-- t (contiguous, input's size) times the noise, plane by plane: as planes x (elements of a plane)
-- against the noise as a column, whose rows numpy's loops take one call each (a 4-D expanded
-- operand would take the element-by-element kernel).
function SpatialDropout:scaleByNoise(t, input)
  local planes = self.noise:nElement()
  if t:isContiguous() and planes > 0 then
    local per = input:nElement() / planes
    t:view(planes, per):cmul(self.noise:view(planes, 1):expand(planes, per))
  else
    t:cmul(self.noise:expandAs(input))
  end
  return t
end

function SpatialDropout:updateOutput(input)
  check.tensorOf(torch.type(self), input, 'input')
  local sizes = self:noiseSize(input)
  self.output:resizeAs(input):copy(input)
  if self.train or self.stochastic_inference then
    self.noise:resize(sizes):bernoulli(1 - self.p)
    self:scaleByNoise(self.output, input)
  else
    self.output:mul(1 - self.p)
  end
  return self.output
end

function SpatialDropout:updateGradInput(input, gradOutput)
  if not gradOutput:isSameSizeAs(input) then
    check.error(('%s: gradOutput size %s does not match input size %s'):format(torch.type(self),
      check.sizestr(gradOutput), check.sizestr(input)))
  end
  if not self.train then error(torch.type(self) .. ': backprop only defined while training') end
  self:scaleByNoise(self.gradInput:resizeAs(gradOutput):copy(gradOutput), input)
  return self.gradInput
end

function SpatialDropout:setp(p)
  self.p = p
end

function SpatialDropout:__tostring__()
  return ('%s(%f)'):format(torch.type(self), self.p)
end

function SpatialDropout:clearState()
  if self.noise then self.noise:set() end
  return parent.clearState(self)
end
