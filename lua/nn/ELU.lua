-- x for x > 0, alpha * (exp(x) - 1) otherwise (Clevert et al. 2015).
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local ELU, parent = torch.class('nn.ELU', 'nn.Module')

function ELU:__init(alpha, inplace)
  parent.__init(self)
  self.alpha = check.optNumber('nn.ELU', alpha, 'alpha') or 1
  self.inplace = inplace or false
end

-- Backward reads only the output (so it works in place): dy/dx = y + alpha where x <= 0.
pointwise.define(ELU, {
  forward = 'local x = $2; $1 = x <= 0 and (math.exp(x) - 1) * v1 or x',
  backward = 'local y = $4; $1 = y <= 0 and $3 * (y + v1) or $3',
  params = function(self) return self.alpha end,
  -- oneDNN's elu is x > 0 ? x : alpha (exp(x) - 1); its backward from the output,
  -- y > 0 ? gradOutput : gradOutput (y + alpha), takes alpha >= 0 only (oneDNN declines others)
  eltwise = {
    forward = function(_, alpha) return 'elu', alpha end,
    backward = function(_, alpha) return 'elu_dst', alpha end,
  },
  -- max(x, 0) + alpha * (exp(min(x, 0)) - 1); the slope min(y, 0) + alpha, or 1 where y > 0
  deviceForward = function(m, output, input, alpha)
    local below = torch.cmin(pointwise.scratch(m, '_part', input), input, 0):exp():add(-1)
    output:cmax(input, 0):add(alpha, below)
  end,
  deviceBackward = function(m, gradInput, _, gradOutput, output, alpha)
    local slope = torch.cmin(pointwise.scratch(m, '_part', output), output, 0):add(alpha)
    slope:add(1 - alpha, pointwise.mask(m, output, 0))
    gradInput:cmul(gradOutput, slope)
  end,
})

function ELU:__tostring__() return ('%s (alpha:%f)'):format(torch.type(self), self.alpha) end
