-- log(1 + exp(beta * x)) / beta; linear (x) where beta * x exceeds threshold.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local SoftPlus, parent = torch.class('nn.SoftPlus', 'nn.Module')

function SoftPlus:__init(beta, threshold)
  parent.__init(self)
  self.beta = check.optNumber('nn.SoftPlus', beta, 'beta') or 1
  self.threshold = check.optNumber('nn.SoftPlus', threshold, 'threshold') or 20
end

-- Backward from the output: dy/dx = 1 - exp(-beta * y).
pointwise.define(SoftPlus, {
  forward = 'local x = $2; $1 = x * v1 > v2 and x or math.log(1 + math.exp(x * v1)) / v1',
  backward = 'local by = $4 * v1; $1 = by > v2 and $3 or $3 * (1 - math.exp(-by))',
  params = function(self) return self.beta, self.threshold end,
  -- The gradient as oneDNN's soft_relu has it, sigmoid(beta x) gradOutput from the input: the
  -- same floats where beta y > threshold >= 20 (the two differ by less than exp(-20) there).
  -- Not the forward pass: oneDNN's soft_relu is off by up to 3e-6 where beta x < -28, below 0.
  eltwise = {
    backward = function(m, beta, threshold)
      if beta > 0 and threshold >= 20 and not m.inplace then return 'soft_relu', beta end
    end,
  },
  -- log1p(exp(beta x)) / beta, and x itself where beta x > threshold
  deviceForward = function(m, output, input, beta, threshold)
    local above = pointwise.mask(m, input, threshold / beta)
    local soft = pointwise.scratch(m, '_slope', input):mul(input, beta):cmin(threshold):exp():log1p():div(beta)
    local below = pointwise.scratch(m, '_part', above):fill(1):add(-1, above)
    output:cmul(input, above):addcmul(soft, below)
  end,
  -- gradOutput * (1 - exp(-beta y) * below), below 1 where beta y <= threshold
  deviceBackward = function(m, gradInput, _, gradOutput, output, beta, threshold)
    local below = pointwise.mask(m, output, threshold / beta):mul(-1):add(1)
    local slope = pointwise.scratch(m, '_slope', output):mul(output, -beta):exp():cmul(below):mul(-1):add(1)
    gradInput:cmul(gradOutput, slope)
  end,
})
