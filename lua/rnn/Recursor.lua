-- nn.Recursor(module[, rho]): runs any module one time-step per forward with BPTT, one step
-- clone per step; the module may itself hold AbstractRecurrent modules.
local Recursor, parent = torch.class('nn.Recursor', 'nn.AbstractRecurrent')

function Recursor:__init(module, rho)
  parent.__init(self, rho or 9999999)
  self.recurrentModule = module
  self.module = module
  self.modules = { module }
  self.sharedClones[1] = module
end

function Recursor:updateOutput(input)
  return self:_recordOutput(self:_forwardModule():updateOutput(input))
end

function Recursor:_updateGradInput(input, gradOutput)
  assert(self.step > 1, "expecting at least one updateOutput")
  local step = self.updateGradInputStep - 1
  assert(step >= 1)
  local module = self:getStepModule(step)
  module:setOutputStep(step) -- recurrent modules inside see the step being back-propagated
  return module:updateGradInput(input, gradOutput)
end

function Recursor:_accGradParameters(input, gradOutput, scale)
  local step = self.accGradParametersStep - 1
  assert(step >= 1)
  local module = self:getStepModule(step)
  module:setOutputStep(step)
  module:accGradParameters(input, gradOutput, scale)
end

function Recursor:forget()
  parent.forget(self)
  nn.Module.forget(self)
  return self
end

function Recursor:maxBPTTstep(rho)
  self.rho = rho
  nn.Module.maxBPTTstep(self, rho)
end

for _, method in ipairs({ 'getHiddenState', 'setHiddenState', 'getGradHiddenState', 'setGradHiddenState' }) do
  Recursor[method] = function(self, ...) return self.modules[1][method](self.modules[1], ...) end
end

Recursor.__tostring__ = nn.Decorator.__tostring__
