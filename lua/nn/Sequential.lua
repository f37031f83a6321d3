-- Modules applied one after another: the output of each is the input of the next.
local check = require 'torch.core.check'
local plans = require 'nn.util.plans'
local planConv = require 'nn.util.plan_conv'
local Sequential = torch.class('nn.Sequential', 'nn.Container')

function Sequential:__len() return #self.modules end
Sequential.__len__ = Sequential.__len

-- output and gradInput are the last and first module's (until the next forward/backward).
local function linkEnds(self)
  local n = #self.modules
  if n > 0 then
    self.output, self.gradInput = self.modules[n].output, self.modules[1].gradInput
  else
    self.output, self.gradInput = torch.Tensor(), torch.Tensor()
  end
end

function Sequential:add(module)
  check.module('nn.Sequential:add', module, 'module')
  if #self.modules == 0 then self.gradInput = module.gradInput end
  table.insert(self.modules, module)
  self.output = module.output
  return self
end

-- Inserts module at index (default: at the end); index may be 1 .. size + 1.
function Sequential:insert(module, index)
  local n = #self.modules
  index = index or n + 1
  if index < 1 or index > n + 1 then
    error(('Sequential:insert: index %s should be contiguous to the existing modules (1 to %d)')
      :format(tostring(index), n + 1), 2)
  end
  table.insert(self.modules, index, module)
  linkEnds(self)
  return self
end

-- Removes the module at index (default: the last).
function Sequential:remove(index)
  local n = #self.modules
  index = index or n
  if index < 1 or index > n then
    error(('Sequential:remove: index %s out of range (1 to %d)'):format(tostring(index), n), 2)
  end
  table.remove(self.modules, index)
  linkEnds(self)
  return self
end

local function layerByLayer(self, input)
  local current = input
  for i, m in ipairs(self.modules) do
    current = self:rethrowErrors(m, i, 'updateOutput', current)
  end
  self.output = current
  return current
end

-- With nn.plans on, a tree of convolutions in evaluation runs as a plan made on its first
-- forward (nn/util/plan_conv.lua); otherwise, and for what no plan serves, layer by layer.
function Sequential:updateOutput(input)
  if plans.enabled then
    local out = planConv.forward(self, input, layerByLayer)
    self.output = out
    return out
  end
  planConv.settle(self)
  return layerByLayer(self, input)
end

-- The outputs are about to go: a plan's lazy modules are put back without rerunning anything.
function Sequential:clearState()
  planConv.settle(self)
  return nn.Container.clearState(self)
end

-- Calls method(input of module i, gradient flowing into it, arg) from the last module to the
-- first. The gradient passed down is what the call returns when `returns`, else the module's
-- gradInput. Returns the gradient reaching the input.
local function backwards(self, method, input, gradOutput, arg, returns)
  local current = gradOutput
  for i = #self.modules, 1, -1 do
    local m = self.modules[i]
    local moduleInput = i > 1 and self.modules[i - 1].output or input
    local result = self:rethrowErrors(m, i, method, moduleInput, current, arg)
    -- as torch7: a backward that returns something else than gradInput still sets it
    if method == 'backward' and i > 1 then m.gradInput = result end
    current = returns and result or m.gradInput
  end
  return current
end

function Sequential:updateGradInput(input, gradOutput)
  self.gradInput = backwards(self, 'updateGradInput', input, gradOutput, nil, true)
  return self.gradInput
end

function Sequential:accGradParameters(input, gradOutput, scale)
  backwards(self, 'accGradParameters', input, gradOutput, scale or 1, false)
end

-- With nn.plans on, a backward right after a planned training-mode forward runs the plan
-- backward (nn/util/plan_train.lua); otherwise layer by layer.
function Sequential:backward(input, gradOutput, scale)
  if plans.enabled then
    local planned, gradInput = planConv.backward(self, input, gradOutput, scale or 1)
    if planned then
      self.gradInput = gradInput
      return gradInput
    end
  end
  self.gradInput = backwards(self, 'backward', input, gradOutput, scale or 1, true)
  return self.gradInput
end

function Sequential:accUpdateGradParameters(input, gradOutput, lr)
  backwards(self, 'accUpdateGradParameters', input, gradOutput, lr, false)
end

function Sequential:__tostring__()
  local lines, chain = {}, { '  [input' }
  for i, m in ipairs(self.modules) do
    chain[#chain + 1] = '(' .. i .. ')'
    lines[#lines + 1] = '  (' .. i .. '): ' .. tostring(m):gsub('\n', '\n  ')
  end
  chain[#chain + 1] = 'output]'
  return 'nn.Sequential {\n' .. table.concat(chain, ' -> ') .. '\n'
    .. (#lines > 0 and table.concat(lines, '\n') .. '\n' or '') .. '}'
end
