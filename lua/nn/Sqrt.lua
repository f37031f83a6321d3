-- sqrt(x + eps); the gradient is 0 where the output is 0.
local check = require 'torch.core.check'
local pointwise = require 'nn.util.pointwise'
local Sqrt, parent = torch.class('nn.Sqrt', 'nn.Module')

function Sqrt:__init(b)
  parent.__init(self)
  self.eps = check.optNumber('nn.Sqrt', b, 'eps') or 0
end

pointwise.define(Sqrt, {
  forward = '$1 = math.sqrt($2 + v1)',
  backward = 'local y = $4; $1 = y == 0 and 0 or 0.5 * $3 / y',
  params = function(self) return self.eps end,
  -- oneDNN's sqrt where eps is 0; its gradient gradOutput / 2y is not 0 where y is 0: none
  eltwise = { forward = function(_, eps) if eps == 0 then return 'sqrt' end end },
  deviceForward = function(_, output, input, eps) output:add(input, eps):sqrt() end,
  -- 0.5 * gradOutput / y, and 0 where y is 0 (there 1 / (2y + 1 - 1) * 0: no 0 * inf)
  deviceBackward = function(m, gradInput, _, gradOutput, output)
    local positive = pointwise.mask(m, output, 0)
    local inverse = pointwise.scratch(m, '_slope', output):mul(output, 2):add(1):add(-1, positive)
    inverse:pow(-1):cmul(positive)
    gradInput:cmul(gradOutput, inverse)
  end,
})
