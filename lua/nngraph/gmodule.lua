-- nn.gModule(inputs, outputs): a module running a graph of nngraph nodes. forwardnodes (inputs
-- first) and backwardnodes (outputs first) are the topological orders of the graph; each node's
-- data holds the inputs it received in the last forward and the gradients in the last backward.
local utils = require 'nngraph.utils'
local plan = require 'nngraph.plan'
local clearTable = require 'table.clear'

local gModule, parent = torch.class('nn.gModule', 'nn.Container')

local function checkNodes(nodes, what)
  if not utils.istable(nodes) then
    error(('nn.gModule: %s must be a table of nngraph.Node, got %s'):format(what, torch.type(nodes)), 4)
  end
  for i = 1, utils.tableMaxN(nodes) do
    if not utils.isNode(nodes[i]) then error('nn.gModule: ' .. utils.expectingNode(nodes[i], what, i), 4) end
  end
end

-- The node's label for error messages.
local function where(node) return node.data.annotations._debugLabel or ('Node' .. node.id) end

function gModule:__init(inputs, outputs)
  parent.__init(self)
  checkNodes(inputs, 'inputs')
  checkNodes(outputs, 'outputs')
  if #inputs == 0 then error('nn.gModule: a graph without inputs is not supported', 3) end

  local outnode = nngraph.Node({ input = {} })
  for _, node in ipairs(outputs) do outnode:add(node, true) end
  local innode = nngraph.Node({ input = {} })
  if #inputs == 1 then
    inputs[1]:add(innode, true)
  else
    for i, node in ipairs(inputs) do
      if #node.children > 0 then
        error(('nn.gModule: inputs[%d] (%s) has inputs of its own; an input node must have none'):format(
          i, where(node)), 3)
      end
    end
    local selects = { innode:split(#inputs) }
    for i, node in ipairs(inputs) do node:add(selects[i], true) end
  end

  self.bg = outnode:graph()
  self.fg = self.bg:reverse()
  local roots = self.fg:roots()
  if #roots ~= 1 or roots[1].data ~= innode.data then
    local labels = {}
    for _, r in ipairs(roots) do if r.data ~= innode.data then labels[#labels + 1] = where(r) end end
    error('nn.gModule: some nodes do not depend on the inputs: ' .. table.concat(labels, ', '), 3)
  end
  self.innode, self.outnode = roots[1], outnode
  self.nInputs = #inputs
  self.forwardnodes = self.fg:topsort()
  self.backwardnodes = self.bg:topsort()
  self:_checkGraph()
  for _, node in ipairs(self.forwardnodes) do
    node.data.forwardNodeId = node.id
    if node.data.module then self:add(node.data.module) end
  end
  self.output = #outputs > 1 and outnode.data.input or nil   -- as torch7's
  self.gradInput = nil
  self.verbose = false
end

-- Every split output is used, and every node using a node of the graph leads to an output.
function gModule:_checkGraph()
  local inGraph = {}
  for _, node in ipairs(self.forwardnodes) do inGraph[node.data] = true end
  for _, node in ipairs(self.forwardnodes) do
    local n = node.data.nSplitOutputs
    if n and n ~= #node.children then
      error(('nn.gModule: %d of split(%d) outputs from the node declared at %s are unused'):format(
        n - #node.children, n, where(node)), 4)
    end
    for user in pairs(node.data.reverseMap or {}) do
      if not inGraph[user.data] then
        error(('nn.gModule: node declared on %s does not connect to gmodule output'):format(where(user)), 4)
      end
    end
  end
end

-- The input a node's module sees: its single input, or the table of its inputs.
local function nodeInput(data)
  local input = data.input or {}
  if #input == 1 then return input[1] end
  return input
end

-- The wiring the run loops follow, worked out once per gModule (kept beside it, not in it, so
-- that saved files stay as torch7's; a loaded or cloned gModule works it out again): users[k]
-- lists, for the node at position k of forwardnodes, the data of each node taking its output
-- and the input position there; inputs[k] lists, for the node at position k of backwardnodes,
-- the data of each node it takes input from and the position of that input in its gradInput
-- (0: its only input, the gradInput itself). backward[k] is the data of that node.
local wirings = setmetatable({}, { __mode = 'k' })

local function wiring(self)
  local w = wirings[self]
  if w then return w end
  w = { users = {}, inputs = {}, backward = {} }
  for k, node in ipairs(self.forwardnodes) do
    local list = {}
    for _, user in ipairs(node.children) do
      list[#list + 1] = user.data
      list[#list + 1] = user.data.mapindex[node.data]
    end
    w.users[k] = list
  end
  for k, node in ipairs(self.backwardnodes) do
    local list = {}
    for _, child in ipairs(node.children) do
      list[#list + 1] = child.data
      list[#list + 1] = #node.children == 1 and 0 or node.data.mapindex[child.data]
    end
    w.inputs[k], w.backward[k] = list, node.data
  end
  wirings[self] = w
  return w
end

-- Runs step(node, k, a, b) over nodes in order (k: the position in nodes), printing each node
-- after its step when self.verbose (nngraph.setDebug replaces it by a version that draws the
-- graph when a step fails). The steps are made once, not per call: a, b carry the call's values.
function gModule:_eachNode(nodes, step, a, b)
  for k, node in ipairs(nodes) do
    step(node, k, a, b)
    if self.verbose then print(' V : ' .. node:label()) end
  end
end

-- Plans run only where the node walk is the plain one: nngraph.setDebug's walk draws the graph
-- of a failing node, which a planned run would skip.
local plainEachNode = gModule._eachNode
local function plannable(self) return self._eachNode == plainEachNode end

-- Forward: runs the node's module (func: a method name, or a function(module, x)) and hands its
-- output to the nodes using it.
local function forwardStep(node, k, func, users)
  local data = node.data
  local output
  if data.selectindex then
    output = data.input[1][data.selectindex]
  else
    output = nodeInput(data)
    local module = data.module
    if module then
      if type(func) == 'string' then output = module[func](module, output) else output = func(module, output) end
    end
    if data.nSplitOutputs and (not utils.istable(output) or #output ~= data.nSplitOutputs) then
      error(('nn.gModule: split(%d) at %s cannot split %s'):format(data.nSplitOutputs, where(node),
        utils.istable(output) and (#output .. ' outputs') or torch.type(output)), 0)
    end
  end
  local list = users[k]
  for j = 1, #list, 2 do
    local user = list[j]
    local into = user.input
    if not into then
      into = {}
      user.input = into
    end
    into[list[j + 1]] = output
  end
end

function gModule:runForwardFunction(func, input)
  if self.nInputs <= 1 then
    input = { input }
  elseif not utils.istable(input) then
    error(('nn.gModule: expecting a table of %d inputs, got %s'):format(self.nInputs, torch.type(input)), 3)
  end
  if #input ~= self.nInputs then
    error(('nn.gModule: got %d inputs instead of %d'):format(#input, self.nInputs), 3)
  end
  local inData = self.innode.data
  inData.input = inData.input or {}
  for i, x in ipairs(input) do inData.input[i] = x end

  -- every node's inputs are all written again below (every node depends on the inputs), so
  -- those of the last call need no clearing. A plan (nngraph/plan.lua) runs the same steps
  -- but for its chains' nodes, which one fused kernel runs.
  local P = func == 'updateOutput' and plannable(self) and plan.forwardPlan(self, inData.input)
  if P and P.fsteps then
    plan.forward(self, P, forwardStep, wiring(self).users)
  else
    self:_eachNode(self.forwardnodes, forwardStep, func, wiring(self).users)
    if func == 'updateOutput' and not P and plannable(self) then plan.afterForward(self, inData.input) end
  end
  local out = self.outnode.data.input
  self.output = #self.outnode.children == 1 and out[1] or out
  return self.output
end

function gModule:updateOutput(input)
  return self:runForwardFunction('updateOutput', input)
end

-- The gradient reaching a node: the sum over the nodes that used its output. Tensors (the
-- common case: an LSTM's state feeding two nodes) are summed in one pass, resized with
-- resizeAs (a size() would allocate a LongStorage every call).
local function totalGradOutput(data)
  local grads = data.gradOutput
  local n = #grads
  if n <= 1 then return grads[1] end
  local first, buf = grads[1], data.gradOutputBuffer
  if torch.isTensor(first) and torch.isTensor(grads[2]) then
    if not torch.isTensor(buf) or buf:type() ~= first:type() then buf = first.new() end
    buf:resizeAs(first):add(first, grads[2])
    for i = 3, n do nn.utils.recursiveAdd(buf, grads[i]) end
  else
    buf = nn.utils.recursiveResizeAs(buf, first)   -- drops stale keys
    buf = nn.utils.recursiveCopy(buf, first)
    for i = 2, n do nn.utils.recursiveAdd(buf, grads[i]) end
  end
  data.gradOutputBuffer = buf
  return buf
end

local function checkGradOutput(self, gradOutput)
  local n = #self.outnode.children
  if n > 1 and (not utils.istable(gradOutput) or #gradOutput ~= n) then
    error(('nn.gModule: got %s gradOutputs instead of %d'):format(
      utils.istable(gradOutput) and #gradOutput or torch.type(gradOutput), n), 3)
  end
end

-- Backward: the node's gradInput, handed to the nodes it took its inputs from.
local function backwardStep(node, k, inputs)
  local data = node.data
  local grad = totalGradOutput(data)
  local list = inputs[k]
  if data.selectindex then   -- element selectindex of the split node's gradient table
    local splitter = list[1].gradOutput
    splitter[1] = splitter[1] or {}
    splitter[1][data.selectindex] = grad
  else
    local gradInput = grad
    if data.module then gradInput = data.module:updateGradInput(nodeInput(data), grad) end
    -- a module may give no gradient for an input (OpenNMT's PositionEmbedding returns {g, nil}
    -- for its lengths): as torch7's table.insert(gradOutput, nil) did, nothing is handed on
    for j = 1, #list, 2 do
      local position = list[j + 1]
      local into = list[j].gradOutput
      local g = gradInput
      if position ~= 0 and g ~= nil then g = g[position] end
      into[#into + 1] = g
    end
  end
end

local function accStep(node, _, scale)
  local data = node.data
  if data.module then
    local grad = #data.gradOutput > 1 and data.gradOutputBuffer or data.gradOutput[1]
    data.module:accGradParameters(nodeInput(data), grad, scale)
  end
end

function gModule:updateGradInput(input, gradOutput)
  checkGradOutput(self, gradOutput)
  local w = wiring(self)
  local P = plannable(self) and plan.backwardPlan(self)
  if P then
    plan.backward(self, P, gradOutput, backwardStep, w.inputs)
  else
    for _, data in ipairs(w.backward) do   -- the lists of the last call stay until now
      local list = data.gradOutput
      if list then clearTable(list) else data.gradOutput = {} end
    end
    self.outnode.data.gradOutput[1] = gradOutput
    self:_eachNode(self.backwardnodes, backwardStep, w.inputs)
    if plannable(self) then
      plan.afterBackward(self)
      -- the plan's first backward: its chains' gradients as every later backward's
      local P2 = plan.rerunFirstBackward and plan.backwardPlan(self, true)
      if P2 and P2.rerun then plan.backward(self, P2, gradOutput, backwardStep, w.inputs) end
    end
  end
  self.gradInput = self.innode.data.gradOutput[1]
  return self.gradInput
end

local function accGradParameters(self, gradOutput, scale, checked)
  checkGradOutput(self, gradOutput)
  local P = plannable(self) and plan.backwardPlan(self, checked)
  if P then plan.acc(self, P, accStep, scale) else self:_eachNode(self.backwardnodes, accStep, scale) end
end

function gModule:accGradParameters(input, gradOutput, scale)
  accGradParameters(self, gradOutput, scale, false)
end

-- As nn.Module's; the plan checked by updateGradInput stands for accGradParameters right after
-- it (a plan's check reads its chains' fields: cold tables in a long unrolled sequence).
function gModule:backward(input, gradOutput, scale)
  scale = scale or 1
  self:updateGradInput(input, gradOutput)
  if self.accGradParameters == gModule.accGradParameters and self.updateGradInput == gModule.updateGradInput then
    accGradParameters(self, gradOutput, scale, true)
  else   -- a subclass's or an instance's own passes
    self:accGradParameters(input, gradOutput, scale)
  end
  return self.gradInput
end

-- Forgets the inputs and gradients kept in the nodes.
function gModule:_clearNodes()
  for _, node in ipairs(self.forwardnodes) do node.data.input = nil end
  for _, node in ipairs(self.backwardnodes) do
    node.data.gradOutput, node.data.gradOutputBuffer = nil, nil
  end
end

function gModule:clearState(...)
  plan.drop(self)
  self:_clearNodes()
  return parent.clearState(self, ...)
end

-- Converts the modules and the inputs and gradients held in the nodes (one cache: a tensor
-- shared between nodes, modules and self.output stays shared).
function gModule:type(typeName, tensorCache)
  if not typeName then return self._type end
  plan.drop(self)
  tensorCache = tensorCache or {}
  for _, node in ipairs(self.forwardnodes) do
    for _, field in ipairs { 'input', 'gradOutput', 'gradOutputBuffer' } do
      node.data[field] = nn.utils.recursiveType(node.data[field], typeName, tensorCache)
    end
  end
  return parent.type(self, typeName, tensorCache)
end

-- Replaces modules (self included) by fn(module), in the nodes too.
function gModule:replace(fn)
  plan.drop(self)
  local out = fn(self)
  local position = {}
  for i, m in ipairs(self.modules) do position[m] = i end
  for _, node in ipairs(self.forwardnodes) do
    local m = node.data.module
    if m then
      node.data.module = m:replace(fn)
      self.modules[position[m]] = node.data.module
    end
  end
  return out
end

-- Calls fn(module, otherModule) over the modules of two gModules of the same structure.
function gModule:map(gm, fn)
  for i, node in ipairs(self.forwardnodes) do
    local other = gm.forwardnodes[i]
    if not other or (node.data.module == nil) ~= (other.data.module == nil) then
      error('nn.gModule.map: trying to map another gModule with a different structure', 2)
    end
    if node.data.module then fn(node.data.module, other.data.module) end
  end
end

-- Files from nngraph versions before gModule kept `modules` list them from the nodes.
function gModule:read(file, version)
  parent.read(self, file, version)
  if type(self.forwardnodes) ~= 'table' then error('nn.gModule: no forwardnodes table', 0) end
  if not self.modules then
    self.modules = {}
    for _, node in ipairs(self.forwardnodes) do
      if type(node) ~= 'table' or type(node.data) ~= 'table' then error('nn.gModule: a node without data', 0) end
      if node.data.module then self.modules[#self.modules + 1] = node.data.module end
    end
  end
end

function gModule:__tostring__()
  return self.name or torch.type(self)
end
