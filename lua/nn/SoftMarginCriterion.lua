-- Two-class logistic loss: sum log(1 + exp(-x y)) for targets y in {-1, 1}.
local loss = require 'nn.util.loss'
local SoftMarginCriterion, parent = torch.class('nn.SoftMarginCriterion', 'nn.Criterion')

function SoftMarginCriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
end

loss.define(SoftMarginCriterion, {
  loss = 'S = S + math.log(1 + math.exp(-X * Y))',
  grad = 'local z = math.exp(-X * Y); G = -N * Y * z / (1 + z)',
  device = {
    terms = function(_, r, x, y) r:cmul(x, y):mul(-1):exp():log1p() end,
    grad = function(_, g, x, y, t) g:cdiv(y, t:cmul(x, y):exp():add(1)):mul(-1) end,   -- -y / (1 + exp(xy))
  },
})
