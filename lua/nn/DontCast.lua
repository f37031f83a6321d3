-- Decorator whose module keeps its tensor type when the network is cast with :type(),
-- :float() etc. With castin (castout defaults to castin) inputs and gradInputs (outputs and
-- gradOutputs) are converted between the outside type and moduleType, the module's own type
-- (found from its output or its parameters when not given).
local check = require 'torch.core.check'
local DontCast, parent = torch.class('nn.DontCast', 'nn.Decorator')

-- dst (reused when it already has the type) holding a copy of src, a tensor or nested table,
-- as tensors of type typeName.
local function typedCopy(dst, src, typeName)
  if torch.type(src) == 'table' then
    dst = torch.type(dst) == 'table' and dst or {}
    for k, v in pairs(src) do dst[k] = typedCopy(dst[k], v, typeName) end
  elseif torch.isTensor(src) then
    dst = torch.type(dst) == typeName and dst or torch.getmetatable(typeName).new()
    dst:resize(src:size())
    if src:nElement() > 0 then dst:copy(src) end
  end
  return dst
end

-- The type of the first tensor in x (a tensor or nested table), and whether there was one.
local function tensorType(x)
  if type(x) == 'table' then
    for _, v in pairs(x) do
      local name, found = tensorType(v)
      if found then return name, true end
    end
    return nil, false
  end
  return torch.type(x), torch.isTensor(x)
end

function DontCast:__init(module, castin, castout, moduleType)
  parent.__init(self, module)
  self.castin = castin
  self.castout = castout == nil and castin or castout
  self.moduleType = check.optTensorType('nn.DontCast', moduleType, 'moduleType')
  if (self.castin or self.castout) and not self.moduleType then
    local name, found = tensorType(module.output)
    if not found then name, found = tensorType(module:parameters()) end
    if not found then error('nn.DontCast: cannot infer moduleType; give it as argument 4') end
    self.moduleType = name
  end
end

-- The module-typed versions of input and gradOutput made by the last updateOutput/updateGradInput.
function DontCast:_moduleArgs(input, gradOutput)
  if self.castin and tensorType(input) ~= self.moduleType then input = self._input end
  if self.castout and gradOutput and tensorType(gradOutput) ~= self.moduleType then
    gradOutput = self._gradOutput
  end
  return input, gradOutput
end

function DontCast:updateOutput(input)
  if self.castin and tensorType(input) ~= self.moduleType then
    self._input = typedCopy(self._input, input, self.moduleType)
    input = self._input
  end
  local output = self.modules[1]:updateOutput(input)
  self.output = self.castout and typedCopy(self.output, output, tensorType(self.output)) or output
  return self.output
end

function DontCast:updateGradInput(input, gradOutput)
  if self.castout and tensorType(gradOutput) ~= self.moduleType then
    self._gradOutput = typedCopy(self._gradOutput, gradOutput, self.moduleType)
  end
  input, gradOutput = self:_moduleArgs(input, gradOutput)
  local gradInput = self.modules[1]:updateGradInput(input, gradOutput)
  self.gradInput = self.castin and typedCopy(self.gradInput, gradInput, tensorType(self.gradInput))
    or gradInput
  return self.gradInput
end

for _, method in ipairs { 'accGradParameters', 'accUpdateGradParameters' } do
  DontCast[method] = function(self, input, gradOutput, arg)
    input, gradOutput = self:_moduleArgs(input, gradOutput)
    self.modules[1][method](self.modules[1], input, gradOutput, arg)
  end
end

-- Casting converts only the outside-facing output / gradInput; the module keeps its type.
function DontCast:type(typeName)
  if self.castout and tensorType(self.output) ~= typeName then
    self.output = typedCopy(nil, self.output, typeName)
  end
  if self.castin and tensorType(self.gradInput) ~= typeName then
    self.gradInput = typedCopy(nil, self.gradInput, typeName)
  end
  return self
end
