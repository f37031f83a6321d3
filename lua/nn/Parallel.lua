-- Child i gets slice i of the input along inputDimension; the outputs are joined along
-- outputDimension.
local check = require 'torch.core.check'
local Parallel, parent = torch.class('nn.Parallel', 'nn.Container')

function Parallel:__init(inputDimension, outputDimension)
  parent.__init(self)
  self.modules = {}
  -- as in torch7 the dimensions may be left out when the container is built only to gather
  -- parameters (treelstm: nn.Parallel():add(treelstm):add(sim_module):getParameters()); a forward
  -- needs them
  if inputDimension ~= nil then check.int('nn.Parallel', inputDimension, 'inputDimension', 1, check.MAXDIM) end
  if outputDimension ~= nil then check.int('nn.Parallel', outputDimension, 'outputDimension', 1, check.MAXDIM) end
  self.inputDimension = inputDimension
  self.outputDimension = outputDimension
end

local function dims(self)
  return check.int('nn.Parallel', self.inputDimension, 'inputDimension', 1, check.MAXDIM),
         check.int('nn.Parallel', self.outputDimension, 'outputDimension', 1, check.MAXDIM)
end

-- The number of slices, checked against the number of children.
local function sliceCount(self, input)
  local dim = dims(self)
  if not torch.isTensor(input) or input:dim() < dim then
    error(('nn.Parallel: expected a tensor with at least %d dimensions as input, got %s'):format(
      dim, torch.isTensor(input) and input:dim() .. ' dimensions' or torch.type(input)))
  end
  local n = input:size(dim)
  if n > #self.modules then
    error(('nn.Parallel: the input has %d slices along dimension %d but there are only %d modules')
      :format(n, dim, #self.modules))
  end
  return n
end

function Parallel:updateOutput(input)
  local inDim, outDim = dims(self)
  local outs = {}
  self.totalOutputSize = self.totalOutputSize or torch.LongStorage()
  local total = self.totalOutputSize
  for i = 1, sliceCount(self, input) do
    local out = self:rethrowErrors(self.modules[i], i, 'updateOutput', input:select(inDim, i))
    outs[i] = out
    if out:dim() < outDim then
      error(('nn.Parallel: output of module %d has %d dimensions, cannot join along dimension %d')
        :format(i, out:dim(), outDim))
    end
    if i == 1 then
      total:resize(out:dim()):copy(out:size())
    else
      for d = 1, #total do
        if d ~= outDim and out:size(d) ~= total[d] then
          error(('nn.Parallel: output of module %d has size %s, cannot join it along dimension %d with size %s')
            :format(i, table.concat(out:size():totable(), 'x'), outDim, table.concat(total:totable(), 'x')))
        end
      end
      total[outDim] = total[outDim] + out:size(outDim)
    end
  end
  self.output:resize(total)
  local offset = 1
  for _, out in ipairs(outs) do
    self.output:narrow(outDim, offset, out:size(outDim)):copy(out)
    offset = offset + out:size(outDim)
  end
  return self.output
end

-- Calls fn(i, module, input slice, gradOutput part) for each slice.
local function eachSlice(self, input, gradOutput, fn)
  local inDim, outDim = dims(self)
  local offset = 1
  for i = 1, sliceCount(self, input) do
    local m = self.modules[i]
    local width = m.output:size(outDim)
    fn(i, m, input:select(inDim, i), gradOutput:narrow(outDim, offset, width))
    offset = offset + width
  end
end

function Parallel:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(input)
  eachSlice(self, input, gradOutput, function(i, m, x, g)
    local gradInput = self:rethrowErrors(m, i, 'updateGradInput', x, g)
    self.gradInput:select(self.inputDimension, i):copy(gradInput)
  end)
  return self.gradInput
end

local function eachChild(method)
  return function(self, input, gradOutput, arg)
    eachSlice(self, input, gradOutput, function(i, m, x, g) self:rethrowErrors(m, i, method, x, g, arg) end)
  end
end
Parallel.accGradParameters = eachChild('accGradParameters')
Parallel.accUpdateGradParameters = eachChild('accUpdateGradParameters')

Parallel.__tostring__ = nn.Container._branchesToString
