-- nn.DataParallelTable (cunn): runs one module on slices of the batch on several GPUs. Here,
-- with no GPUs to spread over, it runs its module on the whole batch, which gives the same
-- results (batch normalization in training mode aside: there each GPU used its slice's
-- statistics). It exists so that scripts building one and checkpoints holding one (torch7's
-- file layout, version 3: the GPU assignments, then the fields) work on the CPU. Loaded by nn
-- (legacy.lua): cunn defines it in torch7, but nn here must not require cunn (cunn requires nn).

local check = require 'torch.core.check'

local DataParallelTable, parent = torch.class('nn.DataParallelTable', 'nn.Container')
DataParallelTable.__version = 3

-- The dispatchers torch7 keeps in the `impl` field: read (their fields), then dropped.
torch.class('nn.DataParallelTable.Basic')
torch.class('nn.DataParallelTable.Threads')

function DataParallelTable:__init(dimension, flattenParams, usenccl)
  parent.__init(self)
  if not dimension then error('nn.DataParallelTable: must specify a dimension!', 2) end
  self.dimension = dimension
  self.gpuAssignments = {}
  self.flattenParams = flattenParams or false
  self.usenccl = false
end

-- add(module, gpu) once per GPU, or add(module, {gpus}): one module, kept once.
function DataParallelTable:add(module, gpus)
  if type(gpus) == 'number' then
    if #self.modules == 0 then self.modules[1] = module end
    self.gpuAssignments[#self.gpuAssignments + 1] = gpus
    return self
  end
  if type(gpus) ~= 'table' or #gpus == 0 then error('nn.DataParallelTable:add: table of GPU IDs required', 2) end
  if #self.modules > 0 then error('nn.DataParallelTable:add: add should only be called once with a table of GPU assignments', 2) end
  self.modules[1], self.gpuAssignments = module, gpus
  return self
end

function DataParallelTable:get(index) return self.modules[index] end
function DataParallelTable:threads() return self end
function DataParallelTable:syncParameters() end

-- The module it runs (add gives it).
local function inner(self, pass)
  local m = self.modules[1]
  if not m then check.error(('nn.DataParallelTable:%s: no module to run: call add(module, gpus) first'):format(pass)) end
  return m
end

function DataParallelTable:updateOutput(input)
  self.output = inner(self, 'updateOutput'):updateOutput(input)
  return self.output
end

function DataParallelTable:updateGradInput(input, gradOutput)
  self.gradInput = inner(self, 'updateGradInput'):updateGradInput(input, gradOutput)
  return self.gradInput
end

function DataParallelTable:accGradParameters(input, gradOutput, scale)
  inner(self, 'accGradParameters'):accGradParameters(input, gradOutput, scale)
end

function DataParallelTable:write(file)
  file:writeObject(self.gpuAssignments)
  parent.write(self, file)
end

function DataParallelTable:read(file, version)
  if version >= 2 then file:readObject() end   -- the GPU assignments, also among the fields
  parent.read(self, file, version)
  self.impl, self.flattenedParams = nil, nil
  for _, k in ipairs { 'inputGpu', 'outputGpu', 'gradInputGpu', 'gradOutputGpu' } do self[k] = nil end
  self.gpuAssignments = self.gpuAssignments or { 1 }
end

function DataParallelTable:__tostring__()
  return 'DataParallelTable: ' .. #self.gpuAssignments .. ' x ' .. tostring(self.modules[1])
end

return DataParallelTable
