-- log(1 / (1 + exp(-x))) = min(x, 0) - log(1 + exp(-|x|)), with no overflow for large |x|;
-- log(1 + z) for small z is computed as log(u) * z / (u - 1), u = 1 + z (exact to rounding).
local pointwise = require 'nn.util.pointwise'
local LogSigmoid = torch.class('nn.LogSigmoid', 'nn.Module')

pointwise.define(LogSigmoid, {
  forward = [[local x = $2; local z = math.exp(-math.abs(x)); local u = 1 + z
    $1 = (x < 0 and x or 0) - (u == 1 and z or math.log(u) * z / (u - 1))]],
  backward = '$1 = $3 / (1 + math.exp($2))',
  -- min(x, 0) - log1p(exp(-|x|)), which never overflows
  deviceForward = function(m, output, input)
    local z = pointwise.scratch(m, '_slope', input):abs(input):mul(-1):exp():log1p()
    output:cmin(input, 0):add(-1, z)
  end,
  deviceBackward = function(m, gradInput, input, gradOutput)
    gradInput:cdiv(gradOutput, pointwise.scratch(m, '_slope', input):exp(input):add(1))
  end,
})
