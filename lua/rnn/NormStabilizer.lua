-- nn.NormStabilizer([beta]): the identity on each step of a sequence of hidden states h(t)
-- (batch x size), whose gradient adds that of the norm-stabilizing penalty (Krueger 2015)
--   beta/T * sum_t mean_batch (||h(t)|| - ||h(t-1)||)^2
-- (updateLoss returns the penalty).
local NormStabilizer, parent = torch.class('nn.NormStabilizer', 'nn.AbstractRecurrent')

function NormStabilizer:__init(beta)
  parent.__init(self, 99999)
  self.beta = beta or 1
  self.recurrentModule = nn.CopyGrad()
  self.modules[1] = self.recurrentModule
  self.sharedClones[1] = self.recurrentModule
end

function NormStabilizer:_accGradParameters() end

function NormStabilizer:updateOutput(input)
  if input:dim() ~= 2 then
    error(('NormStabilizer: expecting batch x size input, got %d dimensions'):format(input:dim()))
  end
  local module = self:_forwardModule()
  local output = module:updateOutput(input)
  if self.train ~= false then
    module.norm = module.norm or output.new()
    module.norm:norm(output, 2, 2)
  end
  return self:_recordOutput(output)
end

function NormStabilizer:updateLoss()
  local loss = 0
  self._normsum = self._normsum or self.output.new()
  for step = 2, self.step - 1 do
    self._normsum:add(self:getStepModule(step).norm, -1, self:getStepModule(step - 1).norm):pow(2)
    loss = loss + self._normsum:mean()
  end
  self.loss = self.beta * loss / (self.step - 1)
  return self.loss
end

-- d/dh(t) of beta * (||h(t)|| - ||h(other)||)^2 / batch = 2 beta (||h(t)|| - ||h(other)||) h(t) / (||h(t)|| batch)
function NormStabilizer:_addPenaltyGradient(module, other)
  local batchSize = module.output:size(1)
  self._normsum:resizeAs(module.norm):copy(module.norm):add(-1, other.norm)
    :mul(2 * self.beta):cdiv(module.norm)
  self._gradInput:mul(module.output, 1 / batchSize):cmul(self._normsum:expandAs(self._gradInput))
  module.gradInput:add(self._gradInput)
end

function NormStabilizer:_updateGradInput(input, gradOutput)
  local step = self.updateGradInputStep - 1
  assert(step < self.step)
  local module = self:getStepModule(step)
  module:updateGradInput(input, gradOutput)
  self._normsum = self._normsum or self.output.new()
  self._gradInput = self._gradInput or self.output.new()
  if step > 1 then self:_addPenaltyGradient(module, self:getStepModule(step - 1)) end
  if step < self.step - 1 then self:_addPenaltyGradient(module, self:getStepModule(step + 1)) end
  return module.gradInput
end

function NormStabilizer:__tostring__() return 'nn.NormStabilizer' end
