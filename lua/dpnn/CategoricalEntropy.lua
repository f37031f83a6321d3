-- Identity forward; backward adds the gradient that maximises the entropy H of the batch's mean
-- categorical distribution p = sum_b input[b] / sum(input) (while H < minEntropy, when set):
-- a regulariser pushing a policy towards using all its categories. The normaliser sum(input)
-- counts as a constant, as in dpnn.
local CategoricalEntropy, parent = torch.class('nn.CategoricalEntropy', 'nn.Module')

local EPS = 1e-6   -- inside the log, so that empty categories give no NaN

function CategoricalEntropy:__init(scale, minEntropy)
  parent.__init(self)
  self.scale = scale or 1
  self.minEntropy = minEntropy
  self.sizeAverage = true
end

local function checkBatch(input)
  if input:dim() ~= 2 then
    error(('nn.CategoricalEntropy: only works with batches (batch x categories), got a %dD input'):format(input:dim()), 3)
  end
end

function CategoricalEntropy:updateOutput(input)
  checkBatch(input)
  self.output:set(input)
  return self.output
end

function CategoricalEntropy:updateGradInput(input, gradOutput)
  checkBatch(input)
  self.gradInput:resizeAs(input):copy(gradOutput)
  local total = input:sum()
  self._p = self._p or input.new()
  self._logp = self._logp or input.new()
  local p = self._p:sum(input, 1):div(total)
  local logp = self._logp:resizeAs(p):copy(p):add(EPS):log()
  self.entropy = -torch.cmul(p, logp):sum()
  if not self.minEntropy or self.entropy < self.minEntropy then
    -- -scale * dH/dinput[b][j] = scale * (log(p_j + eps) + p_j / (p_j + eps)) / total
    local grad = p:clone():cdiv(p:clone():add(EPS)):add(logp):mul(self.scale / total)
    if self.sizeAverage then grad:div(input:size(1)) end
    self.gradInput:add(grad:expandAs(input))
  end
  return self.gradInput
end
