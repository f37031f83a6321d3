-- tanh(x).
local pointwise = require 'nn.util.pointwise'
local Tanh = torch.class('nn.Tanh', 'nn.Module')

pointwise.define(Tanh, {
  forwardOp = function(_, output, input) output:tanh(input) end,
  backward = 'local y = $4; $1 = $3 * (1 - y * y)',
  op = 'tanh',
  eltwise = { forward = 'tanh', backward = 'tanh_dst' },
})
