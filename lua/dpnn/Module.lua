-- dpnn's nn.Module additions: parameter sharing without copies (sharedClone), getParameters
-- over hidden modules too, serialization modes (see nn.Serial), training helpers (max norms,
-- gradient clipping, weight decay, momentum), and batch/online input helpers.
local _ = require 'moses'
local Module = nn.Module

-- Sparse modules override this to return (params, gradParams, scales, size) with holes.
function Module:sparseParameters()
  return self:parameters()
end

function Module:updateParameters(learningRate)
  local params, gradParams, scales = self:sparseParameters()
  for i, param in pairs(params or {}) do
    param:add(-learningRate * (scales and scales[i] or 1), gradParams[i])
  end
end

function Module:zeroGradParameters()
  local _, gradParams = self:sparseParameters()
  for _, gradParam in pairs(gradParams or {}) do gradParam:zero() end
end

-------------------------------- sharedClone --------------------------------

-- Fields holding what a clone shares with its original (sharedClone replaces them by views).
Module.dpnn_parameters = { 'weight', 'bias' }
Module.dpnn_gradParameters = { 'gradWeight', 'gradBias' }

local function isModule(v) return torch.isTypeOf(v, 'nn.Module') end

-- Whether module v is kept as it is (stepClone of an AbstractRecurrent) or clones itself.
local function keptWhole(v, stepClone)
  return isModule(v) and ((stepClone and v.dpnn_stepclone) or v.dpnn_sharedClone)
end

-- Takes the shared fields out of every table reachable from obj, recording them in taken[table].
-- Any tensor field whose storage is a shared parameter's goes too (views of the parameters).
local function detach(obj, opts, taken, sharedStorages)
  if taken[obj] then return end
  local out = {}
  taken[obj] = out
  if isModule(obj) then
    local names = {}
    if opts.params then for _, n in ipairs(obj.dpnn_parameters) do names[#names + 1] = n end end
    if opts.gradParams then for _, n in ipairs(obj.dpnn_gradParameters) do names[#names + 1] = n end end
    for _, name in ipairs(names) do
      local v = obj[name]
      if v ~= nil then
        out[name] = v
        if torch.isTensor(v) and v:storage() then sharedStorages[v:storage()] = true end
      end
    end
    for k, v in pairs(obj) do
      if torch.isTensor(v) and v:storage() and sharedStorages[v:storage()] then out[k] = v end
    end
  end
  for k, v in pairs(obj) do
    if out[k] == nil and type(v) == 'table' then
      if keptWhole(v, opts.stepClone) then out[k] = v else detach(v, opts, taken, sharedStorages) end
    end
  end
  for k in pairs(out) do obj[k] = nil end
end

-- Puts the taken fields back into the original and gives the clone its shared versions.
local function reattach(original, copy, taken, done)
  if done[original] then return end
  done[original] = true
  local out = taken[original] or {}
  for k, v in pairs(out) do
    original[k] = v
    if torch.isTensor(v) then
      copy[k] = v:storage() and v.new():set(v) or v
    elseif isModule(v) and v.dpnn_sharedClone then
      copy[k] = v:dpnn_sharedClone()
    else
      copy[k] = v
    end
  end
  for k, v in pairs(original) do
    if out[k] == nil and type(v) == 'table' and type(copy[k]) == 'table' then reattach(v, copy[k], taken, done) end
  end
end

-- A clone that shares parameters (and gradients) with self, without copying them first:
-- clone = self:clone(); clone:share(self, ...) at no memory cost. With stepClone, modules
-- marked dpnn_stepclone (rnn's recurrent modules) are shared as they are.
function Module:sharedClone(shareParams, shareGradParams, stepClone)
  if shareParams == nil then shareParams = true end
  if shareGradParams == nil then shareGradParams = true end
  if stepClone and self.dpnn_stepclone then return self end
  local opts = { params = shareParams, gradParams = shareGradParams, stepClone = stepClone }
  local taken = {}
  detach(self, opts, taken, {})
  local ok, clone = pcall(self.clone, self)
  reattach(self, ok and clone or {}, taken, {})
  if not ok then error(clone, 0) end
  return clone
end

-- Modules reachable from self through any field (rnn's hidden step clones), self first, each once.
local function reachableModules(root)
  local found, seen = { root }, { [root] = true }
  local function walk(t)
    for _, v in pairs(t) do
      if type(v) == 'table' and not seen[v] then
        seen[v] = true
        if isModule(v) then found[#found + 1] = v end
        walk(v)
      end
    end
  end
  walk(root)
  return found
end

-- As nn's, but over every module reachable from self, so that modules hidden in fields keep
-- sharing storage with the flat tensors.
local nnGetParameters = Module.getParameters
function Module:getParameters()
  local all = nn.Container()
  all.modules = reachableModules(self)
  return nnGetParameters(all)
end

-------------------------------- serialization modes (nn.Serial) --------------------------------

Module.dpnn_mediumEmpty = { 'output', 'gradInput', 'momGradParams', 'dpnn_input' }
Module.dpnn_lightEmpty = Module.dpnn_gradParameters
Module.dpnn_serialEmpty = {}   -- heavy: everything is saved

-- Applies fn to every module found in the fields of self (not self).
local function eachInnerModule(self, fn)
  local function walk(t)
    for _, v in pairs(t) do
      if isModule(v) then fn(v) elseif torch.type(v) == 'table' then walk(v) end
    end
  end
  walk(self)
end

-- Names the fields each module empties when written through nn.Serial.
function Module:serialMode(empty)
  assert(torch.type(empty) == 'table', 'serialMode: expecting a table of field names at arg 1')
  self.dpnn_serialEmpty = empty
  eachInnerModule(self, function(m) m:serialMode(empty) end)
  return self
end

function Module:heavySerial() return self:serialMode({}) end

function Module:mediumSerial()
  self.dpnn_serialEmpty = self.dpnn_mediumEmpty
  eachInnerModule(self, function(m) m:mediumSerial() end)
  return self
end

function Module:lightSerial()
  local empty = _.clone(self.dpnn_mediumEmpty)
  for _, name in ipairs(self.dpnn_lightEmpty) do empty[#empty + 1] = name end
  self.dpnn_serialEmpty = empty
  eachInnerModule(self, function(m) m:lightSerial() end)
  return self
end

-- self as plain tables (no metatables), the fields of dpnn_serialEmpty emptied, each module's
-- class in dpnn_typename; shared tables stay shared through `states`.
function Module:getSerialState(states)
  states = states or {}
  if states[self] then return states[self] end
  local function plain(t)
    local state = {}
    local empty = isModule(t) and t.dpnn_serialEmpty or {}
    for k, v in pairs(t) do
      if _.contains(empty, k) and (torch.type(v) == 'table' or torch.isTensor(v)) then
        state[k] = torch.isTensor(v) and v.new() or {}
      elseif isModule(v) then
        state[k] = v:getSerialState(states)
      elseif torch.type(v) == 'table' then
        states[v] = states[v] or plain(v)
        state[k] = states[v]
      else
        state[k] = v
      end
    end
    return state
  end
  local state = plain(self)
  state.dpnn_typename = torch.type(self)
  states[self] = state
  return state
end

function Module:Serial(tensortype) return nn.Serial(self, tensortype) end

-------------------------------- training --------------------------------

-- The size of the output for a random input of size insize (a table or LongStorage).
function Module:outside(insize)
  local input = torch.type(insize) == 'table' and torch.randn(table.unpack(insize)) or torch.randn(insize)
  return self:updateOutput(input):size()
end

function Module:accept(visitor) visitor:visit(self) end

-- Caps the L2 norm of each output row (dim 1) and/or input column (last dim) of every parameter
-- with more than one dimension; a module's own maxOutNorm/maxInNorm take precedence.
function Module:maxParamNorm(maxOutNorm, maxInNorm)
  maxOutNorm = self.maxOutNorm or maxOutNorm
  maxInNorm = self.maxInNorm or maxInNorm
  if not (maxOutNorm or maxInNorm) then return end
  if self.modules then
    for _, m in ipairs(self.modules) do m:maxParamNorm(maxOutNorm, maxInNorm) end
    return
  end
  for _, param in pairs(self:parameters() or {}) do
    if param:dim() > 1 then
      if maxOutNorm and maxOutNorm > 0 then param:renorm(2, 1, maxOutNorm) end
      if maxInNorm and maxInNorm > 0 then param:renorm(2, param:dim(), maxInNorm) end
    end
  end
end

-- Rescales the gradients so that their joint L2 norm is at most cutoffNorm (per leaf module
-- with moduleLocal); returns the norm before clipping.
function Module:gradParamClip(cutoffNorm, moduleLocal)
  cutoffNorm = self.cutoffNorm or cutoffNorm
  if cutoffNorm <= 0 then return end
  if self.moduleLocal ~= nil then moduleLocal = self.moduleLocal end
  local sumSquares = 0
  if moduleLocal and self.modules then
    for _, m in ipairs(self.modules) do sumSquares = sumSquares + (m:gradParamClip(cutoffNorm, moduleLocal) or 0) ^ 2 end
    return math.sqrt(sumSquares)
  end
  local params, gradParams = self:parameters()
  if not (params and gradParams) then return 0 end
  for _, g in pairs(gradParams) do sumSquares = sumSquares + g:norm() ^ 2 end
  local norm = math.sqrt(sumSquares)
  if norm > cutoffNorm then
    for _, g in pairs(gradParams) do g:mul(cutoffNorm / norm) end
  end
  return norm
end

-- gradParam += wdFactor * param for parameters with at least wdMinDim (2) dimensions.
function Module:weightDecay(wdFactor, wdMinDim)
  wdFactor = self.wdFactor or wdFactor
  if wdFactor <= 0 then return end
  wdMinDim = self.wdMinDim or wdMinDim or 2
  if self.modules then
    for _, m in ipairs(self.modules) do m:weightDecay(wdFactor, wdMinDim) end
    return
  end
  local params, gradParams = self:parameters()
  for i, param in pairs(params or {}) do
    if param:dim() >= wdMinDim then gradParams[i]:add(wdFactor, param) end
  end
end

-- The momentum buffers, one per gradient, started as copies of the gradients.
function Module:momentumGradParameters()
  if not self.momGradParams or _.isEmpty(self.momGradParams) then
    local gradParams = select(2, self:parameters())
    if not gradParams or _.isEmpty(gradParams) then return end
    self.momGradParams = {}
    for i, g in pairs(gradParams) do self.momGradParams[i] = g.new():resizeAs(g):copy(g) end
  end
  return self.momGradParams
end

-- Momentum: mom = momFactor * mom + (1 - momDamp) * grad; then grad = mom, or, with Nesterov,
-- grad = grad + momFactor * mom.
function Module:updateGradParameters(momFactor, momDamp, momNesterov)
  momFactor = self.momFactor or momFactor
  if momFactor <= 0 then return end
  momDamp = self.momDamp or momDamp or momFactor
  if self.momNesterov ~= nil then momNesterov = self.momNesterov end
  if self.modules then
    for _, m in ipairs(self.modules) do m:updateGradParameters(momFactor, momDamp, momNesterov) end
    return
  end
  local params, gradParams = self:sparseParameters() -- a sparse module's momentum rows match these
  if not params or _.isEmpty(params) then return end
  local mom = self:momentumGradParameters()
  for i, g in pairs(gradParams) do mom[i]:mul(momFactor):add(1 - momDamp, g) end
  for i, g in pairs(gradParams) do
    if momNesterov then g:add(momFactor, mom[i]) else g:copy(mom[i]) end
  end
end

function Module:checkParameters()
  for k, param in pairs(self:parameters() or {}) do
    if _.isNaN(param:sum()) then error('NaN Error for param at index' .. k) end
  end
end

-- Turns backward passes through this module into no-ops.
function Module:dontBackward()
  local none = function() end
  self.backward, self.updateGradInput = none, none
  self.accGradParameters, self.accUpdateGradParameters = none, none
  return self
end

-- input, or a contiguous copy of it kept in a buffer (returned again when backward is set).
function Module:contiguousInput(input, backward)
  if backward then return self.dpnn_cinput or input end
  if input:isContiguous() then return input end
  self.dpnn_cinput = self.dpnn_cinput or input.new()
  return self.dpnn_cinput:resizeAs(input):copy(input)
end

-- A view of tensor with a batch dimension of size 1 inserted at batchDim (1) when it has only
-- nDim dimensions (an online example); fromBatch removes it again.
function Module:toBatch(tensor, nDim, batchDim)
  batchDim = batchDim or 1
  self.dpnn_online = tensor:dim() == nDim
  if not self.dpnn_online then return tensor end
  local size = tensor:size():totable()
  table.insert(size, batchDim, 1)
  return tensor:view(table.unpack(size))
end

function Module:fromBatch(tensor, batchDim)
  if not self.dpnn_online then return tensor end
  batchDim = batchDim or 1
  local size = tensor:size():totable()
  assert(table.remove(size, batchDim) == 1, 'fromBatch: the batch dimension should have size 1')
  return tensor:view(table.unpack(size))
end

-- The tensor type most of the parameters have (nil without parameters).
function Module:extrapolateType()
  local counts, best, bestCount = {}, nil, 0
  for _, param in ipairs(self:parameters() or {}) do
    local t = torch.type(param)
    counts[t] = (counts[t] or 0) + 1
    if counts[t] > bestCount then best, bestCount = t, counts[t] end
  end
  return best
end

function Module:profile()
  for _, m in ipairs(self.modules or {}) do m:profile() end
  self.dpnn_profile = true
end

-- Passes the REINFORCE reward on to the modules that use it (nn.Reinforce).
function Module:reinforce(reward)
  for _, m in ipairs(self.modules or {}) do m:reinforce(reward) end
end
