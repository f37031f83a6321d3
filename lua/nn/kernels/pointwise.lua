-- Elementwise layers: updateOutput / updateGradInput built from kernel bodies, in place when
-- the module's `inplace` field is set (output then shares input's storage, and gradInput
-- shares gradOutput's).
--   forward:  '$1 = f($2)'           $1 output, $2 input; or forwardOp(output, input), a tensor op
--   backward: '$1 = g($2, $3, $4)'   $1 gradInput, $2 input, $3 gradOutput, $4 output
--   params(self) gives the scalars v1..v3 the bodies use.
-- CUDA tensors need deviceForward(output, input, ...) and deviceBackward(gradInput, input,
-- gradOutput, output, ...) written with tensor ops; without them the module is CPU only.
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'

local pointwise = {}

local function none() end

-- The errors for an input that is not a CPU tensor (the loops here run on CPU memory), or a
-- gradOutput whose size differs.
function pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(input) then
    check.error(('%s: input must be a tensor, got %s'):format(torch.type(module), torch.type(input)))
  end
  if input._device and not deviceOk then
    check.error(('%s: %s is not supported (CPU kernel)'):format(torch.type(module), torch.type(input)))
  end
end

function pointwise.checkGradOutput(module, input, gradOutput, deviceOk)
  pointwise.checkInput(module, input, deviceOk)
  if not torch.isTensor(gradOutput) then
    check.error(('%s: gradOutput must be a tensor, got %s'):format(torch.type(module),
      torch.type(gradOutput)))
  end
  if gradOutput:nElement() ~= input:nElement() then
    check.error(('%s: gradOutput size %s (%d elements) does not match input size %s (%d elements)')
      :format(torch.type(module), check.sizestr(gradOutput), gradOutput:nElement(),
        check.sizestr(input), input:nElement()))
  end
end

function pointwise.define(cls, spec)
  local params = spec.params or none
  local forward = spec.forward and apply.kernel(2, spec.forward)
  local forwardOp = spec.forwardOp or function(output, input, ...) forward(output, input, ...) end
  local backward = apply.kernel(4, spec.backward)
  local onDevice = spec.deviceForward ~= nil

  function cls:updateOutput(input)
    pointwise.checkInput(self, input, onDevice)
    local run = input._device and spec.deviceForward or forwardOp
    if self.inplace then
      run(input, input, params(self))
      self.output:set(input)
    else
      self.output:resizeAs(input)
      run(self.output, input, params(self))
    end
    return self.output
  end

  function cls:updateGradInput(input, gradOutput)
    pointwise.checkGradOutput(self, input, gradOutput, onDevice)
    local run = input._device and spec.deviceBackward or backward
    if self.inplace then
      run(gradOutput, input, gradOutput, input, params(self))  -- input holds the output
      self.gradInput:set(gradOutput)
    else
      self.gradInput:resizeAs(input)
      run(self.gradInput, input, gradOutput, self.output, params(self))
    end
    return self.gradInput
  end
end

return pointwise
