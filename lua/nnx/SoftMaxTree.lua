-- Hierarchical softmax (Morin & Bengio): the classes are the leaves of a tree given as
-- {[parentId] = IntTensor of childIds}. For each row of a batch, forward({input, target}) returns
-- log P(target) = the sum, along the path from the target up to rootId, of each node's
-- log-softmax over its siblings, computed by that parent's own Linear (its rows of weight/bias).
-- Only the parents on the batch's paths get gradients; `updates` maps them to summed scales,
-- and parameters() returns only those parameters (keyed by parentId, bias at
-- parentId + maxParentId, when static).
local SoftMaxTree, parent = torch.class('nn.SoftMaxTree', 'nn.Module')

function SoftMaxTree:__init(inputSize, hierarchy, rootId, accUpdate, static, verbose)
  parent.__init(self)
  if type(hierarchy) ~= 'table' then error('nn.SoftMaxTree: expecting a table at arg 2 (hierarchy)', 2) end
  self.inputSize, self.rootId, self.accUpdate = inputSize, rootId or 1, accUpdate
  local parentIds, nChildNode = {}, 0
  self.maxParentId, self.maxChildId, self.maxFamily = 0, 0, 0
  for parentId, children in pairs(hierarchy) do
    if torch.type(children):find('Tensor') == nil or children:dim() ~= 1 then
      error(('nn.SoftMaxTree: the children of node %s must be a 1D tensor'):format(tostring(parentId)), 2)
    end
    if parentId < 1 or children:min() < 1 then
      error(('nn.SoftMaxTree: node ids must be positive (parent %d)'):format(parentId), 2)
    end
    table.insert(parentIds, parentId)
    nChildNode = nChildNode + children:size(1)
    self.maxParentId = math.max(self.maxParentId, parentId)
    self.maxChildId = math.max(self.maxChildId, children:max())
    self.maxFamily = math.max(self.maxFamily, children:size(1))
  end
  table.sort(parentIds)
  self.nChildNode, self.nParentNode = nChildNode, #parentIds
  self.parentIds = torch.IntTensor(parentIds)
  -- parentChildren[p] = {first row of p's children in weight, number of children}
  -- childParent[c] = {parent of c, index of c among its siblings}
  self.childIds = torch.IntTensor(nChildNode)
  self.parentChildren = torch.IntTensor(self.maxParentId, 2):fill(-1)
  self.childParent = torch.IntTensor(self.maxChildId, 2):fill(-1)
  local start = 1
  for _, parentId in ipairs(parentIds) do
    local children = hierarchy[parentId]
    local n = children:size(1)
    self.parentChildren[parentId][1], self.parentChildren[parentId][2] = start, n
    self.childIds:narrow(1, start, n):copy(children)
    for i = 1, n do
      local c = children[i]
      self.childParent[c][1], self.childParent[c][2] = parentId, i
    end
    start = start + n
  end
  if self.rootId > self.maxParentId or self.parentChildren[self.rootId][1] == -1 then
    error(('nn.SoftMaxTree: root %d has no children in the hierarchy'):format(self.rootId), 2)
  end
  self:_measurePaths(parentIds)
  if verbose then
    print(('SoftMaxTree: %d parent nodes, %d child nodes, %d leaves'):format(
      self.nParentNode, nChildNode, nChildNode - self.nParentNode))
  end
  self.weight = torch.Tensor(nChildNode, inputSize)
  self.bias = torch.Tensor(nChildNode)
  if not accUpdate then
    self.gradWeight = torch.Tensor(nChildNode, inputSize):zero()
    self.gradBias = torch.Tensor(nChildNode):zero()
  end
  self.updates = {}
  self._nodeBuffer = torch.Tensor()
  self._multiBuffer = torch.Tensor()
  self.batchSize = 0
  self._gradInput = torch.Tensor()
  self._gradTarget = torch.IntTensor()
  self.gradInput = {self._gradInput, self._gradTarget}
  self.static = (static == nil) and true or static
  self:reset()
end

-- maxFamilyPath: the most softmax outputs on one root path; maxDept: the longest path.
function SoftMaxTree:_measurePaths(parentIds)
  self.maxFamilyPath, self.maxDept = 0, 0
  for _, parentId in ipairs(parentIds) do
    local outputs, depth, node = 0, 0, parentId
    while true do
      outputs, depth = outputs + self.parentChildren[node][2], depth + 1
      if node == self.rootId then break end
      node = node <= self.maxChildId and self.childParent[node][1] or -1
      if node == -1 then break end -- a subtree not under the root: unreachable from targets
    end
    self.maxFamilyPath = math.max(self.maxFamilyPath, outputs)
    self.maxDept = math.max(self.maxDept, depth)
  end
end

function SoftMaxTree:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.nChildNode * self.inputSize)
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv)
  return self
end

-- Calls visit(parentId, first, n, childIdx, offset) for each step from target up to the root;
-- offset counts the softmax outputs of the steps before.
function SoftMaxTree:_walk(target, visit)
  local childId, offset = target, 0
  while true do
    local parentId = childId >= 1 and childId <= self.maxChildId and self.childParent[childId][1] or -1
    if parentId == -1 then
      error(('nn.SoftMaxTree: node %d is not the root and has no parent in the tree'):format(childId), 4)
    end
    local first, n = self.parentChildren[parentId][1], self.parentChildren[parentId][2]
    visit(parentId, first, n, self.childParent[childId][2], offset)
    offset = offset + n
    if parentId == self.rootId then return end
    childId = parentId
  end
end

function SoftMaxTree:_check(input, target)
  if input:dim() ~= 2 or input:size(2) ~= self.inputSize or torch.type(target) ~= 'torch.IntTensor'
     or target:dim() ~= 1 or target:size(1) ~= input:size(1) then
    error(('nn.SoftMaxTree: expected {batch x %d input, IntTensor of batch targets}, got {[%s] %s, [%s] %s}')
      :format(self.inputSize, table.concat(input:size():totable(), 'x'), torch.type(input),
              table.concat(target:size():totable(), 'x'), torch.type(target)), 3)
  end
end

function SoftMaxTree:updateOutput(inputTable)
  local input, target = inputTable[1], inputTable[2]
  self:_check(input, target)
  local B = input:size(1)
  if self.batchSize ~= B then
    self.batchSize = B
    self._gradTarget:resizeAs(target):zero()
  end
  self._nodeBuffer:resize(self.maxFamily)
  self._multiBuffer:resize(B * self.maxFamilyPath)
  self.output:resize(B)
  for i = 1, B do
    local x, logp = input[i], 0
    self:_walk(target[i], function(parentId, first, n, childIdx, offset)
      local linear = self._nodeBuffer:narrow(1, 1, n)
      linear:copy(self.bias:narrow(1, first, n)):addmv(self.weight:narrow(1, first, n), x)
      local logsoft = self._multiBuffer:narrow(1, (i - 1) * self.maxFamilyPath + offset + 1, n)
      local top = linear:max()
      local logsum = top + math.log(logsoft:copy(linear):add(-top):exp():sum())
      logsoft:copy(linear):add(-logsum)
      logp = logp + logsoft[childIdx]
    end)
    self.output[i] = logp
  end
  return self.output
end

-- Turns the stored log-softmaxes into the gradients of each node's linear output
-- (grad * (onehot - softmax)) and accumulates gradInput = sum W_node^T * those.
function SoftMaxTree:updateGradInput(inputTable, gradOutput)
  local input, target = inputTable[1], inputTable[2]
  self:_check(input, target)
  if gradOutput:dim() ~= 1 or gradOutput:size(1) ~= input:size(1) then
    error(('nn.SoftMaxTree: gradOutput must be a vector of %d, got size [%s]')
      :format(input:size(1), table.concat(gradOutput:size():totable(), 'x')), 2)
  end
  if self.gradInput then
    self._gradInput:resizeAs(input):zero()
  end
  for i = 1, input:size(1) do
    local g = gradOutput[i]
    self:_walk(target[i], function(parentId, first, n, childIdx, offset)
      local node = self._multiBuffer:narrow(1, (i - 1) * self.maxFamilyPath + offset + 1, n)
      node:exp():mul(-g)
      node[childIdx] = node[childIdx] + g
      if self.gradInput then
        self._gradInput[i]:addmv(self.weight:narrow(1, first, n):t(), node)
      end
    end)
  end
  return self.gradInput
end

function SoftMaxTree:accGradParameters(inputTable, gradOutput, scale)
  local input, target = inputTable[1], inputTable[2]
  scale = scale or 1
  for i = 1, input:size(1) do
    self:_walk(target[i], function(parentId, first, n, childIdx, offset)
      local node = self._multiBuffer:narrow(1, (i - 1) * self.maxFamilyPath + offset + 1, n)
      self.gradWeight:narrow(1, first, n):addr(scale, node, input[i])
      self.gradBias:narrow(1, first, n):add(scale, node)
      self.updates[parentId] = (self.updates[parentId] or 0) + scale
    end)
  end
end

-- The rows of t (weight, bias, their gradients or momentum buffers) that hold parentId's children.
function SoftMaxTree:_rowsOf(t, parentId)
  local first, n = self.parentChildren[parentId][1], self.parentChildren[parentId][2]
  return t:narrow(1, first, n)
end

function SoftMaxTree:getNodeParameters(parentId)
  local params = {self:_rowsOf(self.weight, parentId), self:_rowsOf(self.bias, parentId)}
  if self.accUpdate then return params end
  return params, {self:_rowsOf(self.gradWeight, parentId), self:_rowsOf(self.gradBias, parentId)}
end

function SoftMaxTree:parameters()
  local updated = next(self.updates) ~= nil
  if not updated and not self.static then
    return {self.weight, self.bias}, {self.gradWeight, self.gradBias}
  end
  local parents = {}
  if updated then
    for parentId in pairs(self.updates) do parents[#parents + 1] = parentId end
    table.sort(parents)
  else
    parents = self.parentIds:totable()
  end
  local params, grads = {}, {}
  for _, parentId in ipairs(parents) do
    local w, b = self:_rowsOf(self.weight, parentId), self:_rowsOf(self.bias, parentId)
    local gw = not self.accUpdate and self:_rowsOf(self.gradWeight, parentId) or nil
    local gb = not self.accUpdate and self:_rowsOf(self.gradBias, parentId) or nil
    if self.static then -- keyed, for pairs
      local biasId = parentId + self.maxParentId
      params[parentId], params[biasId], grads[parentId], grads[biasId] = w, b, gw, gb
    else -- a sequence, for ipairs
      table.insert(params, w); table.insert(params, b)
      if gw then table.insert(grads, gw); table.insert(grads, gb) end
    end
  end
  return params, grads, {}, self.nChildNode * 2
end

-- Momentum buffers shaped as gradWeight and gradBias (dp's momentum uses them): both whole, or
-- in static mode, once a batch has updated some parents, their rows keyed as parameters() keys
-- them.
function SoftMaxTree:momentumGradParameters()
  if self.accUpdate then error('nn.SoftMaxTree: momentum needs gradients (accUpdate is set)', 2) end
  if not self.momGradParams or not next(self.momGradParams) then
    self.momGradParams = {self.gradWeight:clone():zero(), self.gradBias:clone():zero()}
  end
  if not (self.static and next(self.updates)) then return self.momGradParams end
  local views = {}
  for parentId in pairs(self.updates) do
    views[parentId] = self:_rowsOf(self.momGradParams[1], parentId)
    views[parentId + self.maxParentId] = self:_rowsOf(self.momGradParams[2], parentId)
  end
  return views
end

function SoftMaxTree:updateParameters(learningRate)
  assert(not self.accUpdate, 'nn.SoftMaxTree: updateParameters needs gradients (accUpdate is set)')
  local params, grads = self:parameters()
  for k, param in pairs(params) do param:add(-learningRate, grads[k]) end
end

function SoftMaxTree:zeroGradParameters()
  local _, grads = self:parameters()
  for _, g in pairs(grads) do g:zero() end
  for k in pairs(self.updates) do self.updates[k] = nil end
end

function SoftMaxTree:maxNorm(maxNorm)
  for _, param in pairs(self:parameters()) do
    if param:dim() == 2 and maxNorm then param:renorm(2, 1, maxNorm) end
  end
end

-- The tree's index tensors stay IntTensors whatever the module's type.
function SoftMaxTree:type(type, cache)
  if type == torch.type(self.weight) then return self end
  local keep = {'parentChildren', 'childParent', 'childIds', 'parentIds', '_gradTarget'}
  local saved = {}
  for _, k in ipairs(keep) do saved[k], self[k] = self[k], nil end
  parent.type(self, type, cache)
  for _, k in ipairs(keep) do self[k] = saved[k] end
  self.gradInput = {self._gradInput, self._gradTarget}
  self.batchSize = 0
  return self
end
