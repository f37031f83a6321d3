-- Zeroes each element with probability p while training. v2 (the default) scales the kept
-- elements by 1/(1-p) so that evaluation is the identity; v1 scales by (1-p) at evaluation.
-- stochasticInference keeps the noise at evaluation too.
local check = require 'torch.core.check'
local Dropout, parent = torch.class('nn.Dropout', 'nn.Module')

function Dropout:__init(p, v1, inplace, stochasticInference)
  parent.__init(self)
  self.p = check.optNumber(torch.type(self), p, 'p') or 0.5
  self.train = true
  self.inplace = inplace
  self.stochastic_inference = stochasticInference or false
  self.v2 = not v1
  if not (self.p >= 0 and self.p < 1) then
    check.error(('%s: illegal percentage, must be 0 <= p < 1, got %s'):format(torch.type(self), self.p))
  end
  self.noise = torch.Tensor()
end

-- Large inputs take one pass for the noise (threaded, see lua/torch/backend/cpu/random.lua for
-- its stream) and one for output = input * noise (torch.elementwise), rather than four.
local SCALE = 'n = n / q; y = x * n'
local SCALED = 'y = x * n'

function Dropout:updateOutput(input)
  if self.p > 0 and (self.train or self.stochastic_inference) then
    local keep = 1 - self.p
    self.noise:resizeAs(input):bernoulli(keep)
    if self.inplace then self.output:set(input) else self.output:resizeAs(input) end
    local tensors = { n = self.noise, x = input, y = self.output }
    if self.v2 and torch.elementwise(SCALE, tensors, { q = keep }) then return self.output end
    if not self.v2 and torch.elementwise(SCALED, tensors) then return self.output end
    if not self.inplace then self.output:copy(input) end
    if self.v2 then self.noise:div(keep) end
    self.output:cmul(self.noise)
    return self.output
  end
  if self.inplace then self.output:set(input) else self.output:resizeAs(input):copy(input) end
  if self.p > 0 then
    if not self.v2 then
      self.output:mul(1 - self.p)
    end
  end
  return self.output
end

function Dropout:updateGradInput(input, gradOutput)
  if self.p > 0 and self.train and (not torch.isTensor(gradOutput)
      or gradOutput:nElement() ~= self.noise:nElement()) then
    check.error(('%s: gradOutput size %s does not match the noise of the last forward (%s): call forward with this input before backward')
      :format(torch.type(self), torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
        check.sizestr(self.noise)))
  end
  if self.inplace then
    self.gradInput:set(gradOutput)
  else
    self.gradInput:resizeAs(gradOutput)
    if self.p > 0 and self.train
        and torch.elementwise(SCALED, { n = self.noise, x = gradOutput, y = self.gradInput }) then
      return self.gradInput
    end
    self.gradInput:copy(gradOutput)
  end
  if self.p > 0 then
    if self.train then
      self.gradInput:cmul(self.noise)
    elseif not self.v2 then
      self.gradInput:mul(1 - self.p)
    end
  end
  return self.gradInput
end

function Dropout:setp(p)
  self.p = p
end

function Dropout:__tostring__()
  return ('%s(%f)'):format(torch.type(self), self.p)
end

function Dropout:clearState()
  if self.noise then self.noise:set() end
  return parent.clearState(self)
end
