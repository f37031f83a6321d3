-- nn.GPU(module, device[, outdevice]): runs module on one CUDA device, as torch/nn's decorator
-- for model parallelism. luabridge has one CUDA device, so inputs and outputs never move; a CUDA
-- module's calls still run inside cutorch.withDevice(device), which refuses a device that does
-- not exist. CPU modules pass straight through. Files saved with nn.GPU keep torch/nn's layout
-- (a {type, device} header, then the fields) and load onto device 1 when theirs is absent.
local GPU, parent = torch.class('nn.GPU', 'nn.Container')

local function onCuda(self)
  return (self._type or ''):find('torch%.Cuda.*Tensor') ~= nil
end

-- fn() on the decorated device when the module is a CUDA one, else fn() as it is
local function onDevice(self, fn)
  if onCuda(self) then return cutorch.withDevice(self.device, fn) end
  return fn()
end

function GPU:__init(module, device, outdevice)
  parent.__init(self)
  if type(device) ~= 'number' then
    error('nn.GPU(module, device[, outdevice]): device must be a number, got ' .. torch.type(device), 2)
  end
  if not torch.isTypeOf(module, 'nn.Module') then
    error('nn.GPU(module, device[, outdevice]): module must be an nn.Module, got ' .. torch.type(module), 2)
  end
  self.device, self.outdevice = device, outdevice or device
  self.modules[1] = module
  if module:type():find('torch%.Cuda.*Tensor') then self:type(module:type()) end
end

function GPU:setDevice(device)
  self.device = device or self.device
  return self
end

function GPU:updateOutput(input)
  self.output = onDevice(self, function() return self.modules[1]:updateOutput(input) end)
  return self.output
end

function GPU:updateGradInput(input, gradOutput)
  self.gradInput = onDevice(self, function() return self.modules[1]:updateGradInput(input, gradOutput) end)
  return self.gradInput
end

function GPU:accGradParameters(input, gradOutput, scale)
  onDevice(self, function() self.modules[1]:accGradParameters(input, gradOutput, scale) end)
end

for _, name in ipairs { 'apply', 'zeroGradParameters', 'updateParameters', 'training', 'evaluate', 'clearState',
                        'share', 'reset' } do
  GPU[name] = function(self, ...)
    local args = { ... }
    onDevice(self, function() parent[name](self, unpack(args)) end)
    return self
  end
end

function GPU:clone(...)
  local args = { ... }
  return onDevice(self, function() return parent.clone(self, unpack(args)) end)
end

function GPU:type(kind, cache)
  if kind and kind:find('torch%.Cuda.*Tensor') then
    cutorch.withDevice(self.device, function() parent.type(self, kind, cache) end)
  else
    self.output, self.gradInput = nil, nil
    parent.type(self, kind, cache)
  end
  return self
end

function GPU:write(file)
  local fields = {}
  for k, v in pairs(self) do fields[k] = v end
  file:writeObject({ self._type, self.device })
  file:writeObject(fields)
end

function GPU:read(file)
  local header = file:readObject()
  local device = header[2]
  local devices = rawget(_G, 'cutorch') and cutorch.getDeviceCount() or 1
  if header[1] and header[1]:find('torch%.Cuda.*Tensor') and type(device) == 'number' and device > devices then
    print('Warning : model was saved with more devices than available on current host.')
    print('Attempting to load module onto device 1')
    device = 1
  end
  for k, v in pairs(file:readObject()) do self[k] = v end
  self.device = device or self.device
end

function GPU:__tostring__()
  local inner = self.modules[1].__tostring__ and self.modules[1]:__tostring__() or torch.type(self.modules[1])
  return 'nn.GPU(' .. inner .. ', ' .. tostring(self.device) .. ')'
end
