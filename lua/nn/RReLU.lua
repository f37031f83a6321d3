-- Randomized leaky ReLU (Xu et al. 2015): while training, each x <= 0 is scaled by a slope
-- drawn uniformly from [lower, upper] (kept in noise for backward); at evaluation the slope
-- is (lower + upper) / 2.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.util.pointwise'
local RReLU, parent = torch.class('nn.RReLU', 'nn.Module')

-- The loops are the op table's rrelu_keep_positive, rrelu_leaky, rrelu_leaky_grad (nn_pointwise).

function RReLU:__init(l, u, ip)
  parent.__init(self)
  self.lower = check.optNumber('nn.RReLU', l, 'lower') or 1 / 8
  self.upper = check.optNumber('nn.RReLU', u, 'upper') or 1 / 3
  if not (self.lower <= self.upper and self.lower >= 0) then
    check.error(('nn.RReLU: expected 0 <= lower <= upper, got lower %s, upper %s'):format(self.lower, self.upper))
  end
  self.noise = torch.Tensor()
  self.train = true
  self.inplace = ip or false
end

function RReLU:updateOutput(input)
  pointwise.checkInput(self, input)
  local out = self.inplace and input or self.output:resizeAs(input)
  if self.train then
    self.noise:resizeAs(input):uniform(self.lower, self.upper)
    backend.of(input).rrelu_keep_positive(self.noise, input)
    out:cmul(input, self.noise)
  else
    backend.of(input).rrelu_leaky(out, input, (self.lower + self.upper) / 2)
  end
  if self.inplace then self.output:set(input) end
  return self.output
end

function RReLU:updateGradInput(input, gradOutput)
  check.sameElements('nn.RReLU', input, gradOutput)
  local gi = self.inplace and gradOutput or self.gradInput:resizeAs(input)
  if self.train and self.upper - self.lower > 1e-6 then
    gi:cmul(gradOutput, self.noise)
  else
    backend.of(input).rrelu_leaky_grad(gi, input, gradOutput, (self.lower + self.upper) / 2)
  end
  if self.inplace then self.gradInput:set(gradOutput) end
  return self.gradInput
end

function RReLU:__tostring__()
  return ('%s (l:%f, u:%f)'):format(torch.type(self), self.lower, self.upper)
end

function RReLU:clearState()
  if self.noise then self.noise:set() end
  return parent.clearState(self)
end
