-- The base of every loss: forward(input, target) gives a number (self.output), backward the
-- gradient with respect to the input (self.gradInput).
local Criterion = torch.class('nn.Criterion')

function Criterion:__init()
  self.gradInput = torch.Tensor()
  self.output = 0
end

function Criterion:updateOutput(input, target) end
function Criterion:updateGradInput(input, target) end

function Criterion:forward(input, target)
  return self:updateOutput(input, target)
end

function Criterion:backward(input, target)
  return self:updateGradInput(input, target)
end

-- A deep copy (tensors sharing a storage share the copy), as nn.Module:clone.
function Criterion:clone()
  return nn.Module._deepCopy(self, {}, {})
end

-- Converts every tensor field (nested tables included) to the tensor type `name`.
function Criterion:type(name, tensorCache)
  assert(name, 'Criterion:type: a tensor type to convert to is required')
  tensorCache = tensorCache or {}
  tensorCache[self] = name
  for key, value in pairs(self) do
    self[key] = nn.utils.recursiveType(value, name, tensorCache)
  end
  return self
end

local typeShortcuts = {
  float = 'torch.FloatTensor', double = 'torch.DoubleTensor', cuda = 'torch.CudaTensor',
  cudaHalf = 'torch.CudaHalfTensor', cudaDouble = 'torch.CudaDoubleTensor',
}
for method, name in pairs(typeShortcuts) do
  Criterion[method] = function(self) return self:type(name) end
end

function Criterion:__call__(input, target)
  self.output = self:forward(input, target)
  self.gradInput = self:backward(input, target)
  return self.output, self.gradInput
end
