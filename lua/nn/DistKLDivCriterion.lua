-- Kullback-Leibler divergence of the target distribution y from exp(x) (x holds log-probabilities):
-- sum over y > 0 of y (log y - x).
local check = require 'torch.check'
local loss = require 'nn.kernels.loss'
local DistKLDivCriterion, parent = torch.class('nn.DistKLDivCriterion', 'nn.Criterion')

function DistKLDivCriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
end

loss.define(DistKLDivCriterion, {
  loss = 'if Y > 0 then S = S + Y * (math.log(Y) - X) end',
  grad = 'G = Y > 0 and -N * Y or 0',
  check = function(self, input, target)
    if not input:isSameSizeAs(target) then
      check.error(('%s: input and target should have the same size, got %s and %s'):format(
        torch.type(self), check.sizestr(input), check.sizestr(target)))
    end
  end,
})
