-- Mean squared error: sum (x - y)^2, divided by the element count when sizeAverage. CUDA
-- input runs tensor ops (the difference kept in _diff), after the same checks.
local loss = require 'nn.kernels.loss'
local MSECriterion, parent = torch.class('nn.MSECriterion', 'nn.Criterion')
MSECriterion._deviceKernel = true

MSECriterion.__init = loss.initSizeAverage(parent)

loss.define(MSECriterion, {
  loss = 'local z = X - Y; S = S + z * z',
  grad = 'G = 2 * N * (X - Y)',
})

local hostOutput, hostGradInput = MSECriterion.updateOutput, MSECriterion.updateGradInput

-- input - target on the device, or nil for CPU input.
local function deviceDiff(self, input, target)
  if not (torch.isTensor(input) and input._device) then return nil end
  loss.checkPair(self, input, target)
  self._diff = self._diff or input.new()
  return self._diff:resizeAs(input):copy(target):mul(-1):add(input)
end

function MSECriterion:updateOutput(input, target)
  local d = deviceDiff(self, input, target)
  if not d then return hostOutput(self, input, target) end
  self.output = d:dot(d) / (self.sizeAverage and input:nElement() or 1)
  return self.output
end

function MSECriterion:updateGradInput(input, target)
  local d = deviceDiff(self, input, target)
  if not d then return hostGradInput(self, input, target) end
  self.gradInput:resizeAs(input):copy(d):mul(2 / (self.sizeAverage and input:nElement() or 1))
  return self.gradInput
end
