-- x - tanh(x).
local pointwise = require 'nn.kernels.pointwise'
local TanhShrink = torch.class('nn.TanhShrink', 'nn.Module')

pointwise.define(TanhShrink, {
  forward = 'local x = $2; $1 = x - math.tanh(x)',
  backward = 'local t = math.tanh($2); $1 = $3 * t * t',
})
