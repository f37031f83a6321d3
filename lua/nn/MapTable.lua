-- Applies one module to every entry of the input table, through clones of it made as needed
-- (sharing weight, bias and their gradients with it unless shared == false).
local check = require 'torch.core.check'
local MapTable, parent = torch.class('nn.MapTable', 'nn.Container')

local SHARED_PARAMS = { 'weight', 'bias', 'gradWeight', 'gradBias' }

function MapTable:__init(module, shared)
  parent.__init(self)
  self.shared = shared == nil or shared
  self.sharedparams = { unpack(SHARED_PARAMS) }
  self.output = {}
  self.gradInput = {}
  if module ~= nil then self:add(module) end
end

-- Makes sure there are n clones (the module itself first).
function MapTable:_extend(n)
  if not self.module then check.error('nn.MapTable: no module to apply (give one to the constructor or to add)') end
  self.sharedparams = self.sharedparams or { unpack(SHARED_PARAMS) }
  self.modules[1] = self.module
  for i = 2, n do
    if not self.modules[i] then
      self.modules[i] = self.shared and self.module:clone(unpack(self.sharedparams)) or self.module:clone()
    end
  end
end

-- Keeps exactly n clones.
function MapTable:resize(n)
  self:_extend(n)
  for i = #self.modules, n + 1, -1 do
    self.modules[i]:clearState()
    self.modules[i] = nil
  end
end

function MapTable:add(module)
  assert(not self.module, 'nn.MapTable: holds a single module, one is already set')
  self.module = check.module('nn.MapTable:add', module, 'module')
  self.modules[1] = module
  return self
end

local function checkTable(input)
  if torch.type(input) ~= 'table' then
    error('nn.MapTable: expected a table as input, got ' .. torch.type(input), 3)
  end
end

function MapTable:updateOutput(input)
  checkTable(input)
  self.output = {}
  self:_extend(#input)
  for i = 1, #input do
    self.output[i] = self:rethrowErrors(self.modules[i], i, 'updateOutput', input[i])
  end
  return self.output
end

function MapTable:updateGradInput(input, gradOutput)
  checkTable(input)
  self.gradInput = {}
  self:_extend(#input)
  for i = 1, #input do
    self.gradInput[i] = self:rethrowErrors(self.modules[i], i, 'updateGradInput', input[i], gradOutput[i])
  end
  return self.gradInput
end

local function eachEntry(method, default)
  return function(self, input, gradOutput, arg)
    checkTable(input)
    self:_extend(#input)
    for i = 1, #input do
      self:rethrowErrors(self.modules[i], i, method, input[i], gradOutput[i], arg or default)
    end
  end
end
MapTable.accGradParameters = eachEntry('accGradParameters', 1)
MapTable.accUpdateGradParameters = eachEntry('accUpdateGradParameters', 1)

-- With shared parameters, working on the module reaches all clones at once.
function MapTable:zeroGradParameters()
  if not self.module then return end
  if self.shared then self.module:zeroGradParameters() else parent.zeroGradParameters(self) end
end

function MapTable:updateParameters(learningRate)
  if not self.module then return end
  if self.shared then self.module:updateParameters(learningRate) else parent.updateParameters(self, learningRate) end
end

-- Drops the clones (they are remade on the next call).
function MapTable:clearState()
  for i = #self.modules, 2, -1 do
    self.modules[i]:clearState()
    self.modules[i] = nil
  end
  return parent.clearState(self)
end

function MapTable:__tostring__()
  if not self.module then return torch.type(self) .. ' { }' end
  return torch.type(self) .. ' {\n  ' .. tostring(self.module):gsub('\n', '\n        ') .. '\n}'
end
