-- Huber loss with threshold 1: z^2 / 2 for |z| < 1, else |z| - 1/2, where z = x - y.
local loss = require 'nn.util.loss'
local SmoothL1Criterion, parent = torch.class('nn.SmoothL1Criterion', 'nn.Criterion')

SmoothL1Criterion.__init = loss.initSizeAverage(parent)

-- branch-free: with a = |z| and m = min(a, 1), the loss is m (a - m / 2) and the gradient
-- clamp(z, -1, 1)
loss.define(SmoothL1Criterion, {
  loss = 'local a = math.abs(X - Y); local m = math.min(a, 1); S = S + m * (a - 0.5 * m)',
  grad = 'G = N * math.max(-1, math.min(1, X - Y))',
  device = {
    terms = function(_, r, x, y, m)
      r:add(x, -1, y):abs()
      m:clamp(r, 0, 1)
      r:add(-0.5, m):cmul(m)
    end,
    grad = function(_, g, x, y) g:add(x, -1, y):clamp(-1, 1) end,
  },
})
