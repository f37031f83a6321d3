-- The base of every layer: forward/backward through updateOutput, updateGradInput and
-- accGradParameters, parameter access and flattening, type conversion, copying, traversal.
-- Subclasses may skip parent.__init (then output/gradInput are nil until they set them) and
-- may hold tables of tensors anywhere: every method here copes with both.
local Module = torch.class('nn.Module')

function Module:__init()
  self.gradInput = torch.Tensor()
  self.output = torch.Tensor()
  self._type = self.output:type()
end

-- {weight, bias} and {gradWeight, gradBias}, for those this module has; nothing otherwise.
function Module:parameters()
  if self.weight and self.bias then
    return { self.weight, self.bias }, { self.gradWeight, self.gradBias }
  elseif self.weight then
    return { self.weight }, { self.gradWeight }
  elseif self.bias then
    return { self.bias }, { self.gradBias }
  end
end

function Module:updateOutput(input) return self.output end
function Module:updateGradInput(input, gradOutput) return self.gradInput end
function Module:accGradParameters(input, gradOutput, scale) end

function Module:forward(input)
  return self:updateOutput(input)
end

function Module:backward(input, gradOutput, scale)
  scale = scale or 1
  self:updateGradInput(input, gradOutput)
  self:accGradParameters(input, gradOutput, scale)
  return self.gradInput
end

function Module:backwardUpdate(input, gradOutput, lr)
  self:updateGradInput(input, gradOutput)
  self:accUpdateGradParameters(input, gradOutput, lr)
  return self.gradInput
end

-- parameters -= lr * dE/dparameters, without using the gradient buffers when they are private.
function Module:accUpdateGradParameters(input, gradOutput, lr)
  if self.shared then
    self:sharedAccUpdateGradParameters(input, gradOutput, lr)
  else
    self:defaultAccUpdateGradParameters(input, gradOutput, lr)
  end
end

-- The gradient fields point at the parameters for one accumulation scaled by -lr.
function Module:defaultAccUpdateGradParameters(input, gradOutput, lr)
  local gradWeight, gradBias = self.gradWeight, self.gradBias
  self.gradWeight, self.gradBias = self.weight, self.bias
  self:accGradParameters(input, gradOutput, -lr)
  self.gradWeight, self.gradBias = gradWeight, gradBias
end

-- Shared parameters may alias another module's gradients: go through the gradient buffers.
function Module:sharedAccUpdateGradParameters(input, gradOutput, lr)
  if self:parameters() then
    self:zeroGradParameters()
    self:accGradParameters(input, gradOutput, 1)
    self:updateParameters(lr)
  end
end

function Module:zeroGradParameters()
  local _, grads = self:parameters()
  for _, g in ipairs(grads or {}) do g:zero() end
end

function Module:updateParameters(learningRate)
  local params, grads = self:parameters()
  for i, p in ipairs(params or {}) do p:add(-learningRate, grads[i]) end
end

function Module:training() self.train = true end
function Module:evaluate() self.train = false end

-- Makes the named fields of self views of mlp's (share(mlp, 'weight', 'bias', ...)).
function Module:share(mlp, ...)
  for _, name in ipairs({ ... }) do
    if self[name] ~= nil then
      self[name]:set(mlp[name])
      self.shared, mlp.shared = true, true
    end
  end
  return self
end

local function newStorageLike(st)
  local copy = torch[torch.typename(st):match('^torch%.(.+)$')](st:size())
  if st:size() > 0 then copy:copy(st) end
  return copy
end

-- A deep copy standing in for torch7's serialise-and-read: tables (metatables kept), tensors
-- and storages are copied once each, so whatever shared a storage shares the copy. In modules,
-- the tensor fields named in `blank` come out empty (they are shared afterwards).
local function deepCopy(x, seen, blank)
  if seen[x] ~= nil then return seen[x] end
  local r
  if torch.isStorage(x) then
    r = newStorageLike(x)
  elseif torch.isTensor(x) then
    r = x.new()
    local st = x:storage()
    if st then r:set(deepCopy(st, seen, blank), x:storageOffset(), x:size(), x:stride()) end
  elseif type(x) == 'table' then
    r = {}
    seen[x] = r
    local isModule = next(blank) ~= nil and torch.isTypeOf(x, 'nn.Module')
    for k, v in pairs(x) do
      if isModule and blank[k] and torch.isTensor(v) then
        r[k] = v.new()
      else
        r[deepCopy(k, seen, blank)] = deepCopy(v, seen, blank)
      end
    end
    return setmetatable(r, getmetatable(x))
  elseif type(x) == 'function' then   -- a fresh closure, as torch7's clone (a write and read) makes
    return torch.File.copyFunction(x, function(v) return deepCopy(v, seen, blank) end, seen)
  else
    return x
  end
  seen[x] = r
  return r
end
Module._deepCopy = deepCopy

-- A deep copy; clone('weight', 'bias', ...) makes those fields (in every submodule) share the
-- original's storage instead of being copied.
function Module:clone(...)
  local blank = {}
  for _, name in ipairs({ ... }) do blank[name] = true end
  local c = deepCopy(self, {}, blank)
  if select('#', ...) > 0 then c:share(self, ...) end
  return c
end

-- Converts every tensor reachable from the fields (tables and submodules included) to the
-- tensor type `name`. Tensors sharing a storage before share one after; pass the same
-- tensorCache to several calls to keep sharing across them.
function Module:type(name, tensorCache)
  if not name then return self._type end
  tensorCache = tensorCache or {}
  tensorCache[self] = name   -- converted already: recursiveType skips it (cycles, shared modules)
  for key, value in pairs(self) do
    self[key] = nn.utils.recursiveType(value, name, tensorCache)
  end
  self._type = name
  return self
end

local typeShortcuts = { float = 'torch.FloatTensor', double = 'torch.DoubleTensor', cuda = 'torch.CudaTensor' }
for method, name in pairs(typeShortcuts) do
  Module[method] = function(self, ...) return self:type(name, ...) end
end

function Module:reset() end

-- Serialisation hooks (torch7's File:writeObject / readObject): all fields as one table, for
-- subclasses that add to them (parent.read / parent.write).
function Module:write(file) file:writeFields(self) end
function Module:read(file) file:readFields(self) end

-- Calls fn on this module and, through containers, on every submodule (preorder).
function Module:apply(fn)
  fn(self)
  for _, m in ipairs(self.modules or {}) do m:apply(fn) end
end

-- This module and all its submodules, preorder.
function Module:listModules()
  local list = { self }
  for _, m in ipairs(self.modules or {}) do
    for _, sub in ipairs(m:listModules()) do list[#list + 1] = sub end
  end
  return list
end

-- Modules of class typename (exact name), and the container holding each.
function Module:findModules(typename, container)
  container = container or self
  local found, holders = {}, {}
  if torch.typename(self) == typename then
    found[1], holders[1] = self, container
  end
  if type(self.modules) == 'table' then
    for _, m in ipairs(self.modules) do
      local f, h = m:findModules(typename, self)
      for i = 1, #f do found[#found + 1] = f[i]; holders[#holders + 1] = h[i] end
    end
  end
  return found, holders
end

-- Replaces each module (self included) by fn(module); returns fn(self).
function Module:replace(fn)
  local out = fn(self)
  if self.modules then
    for i, m in ipairs(self.modules) do self.modules[i] = m:replace(fn) end
  end
  return out
end

-- Frees output and gradInput (and, in subclasses, buffers) before saving or copying.
-- Empties output, gradInput and any buffers named (subclasses pass theirs: clearState(self, '_buf')).
function Module:clearState(...)
  return nn.utils.clear(self, 'output', 'gradInput', ...)
end

function Module:__call__(input, gradOutput)
  self:forward(input)
  if gradOutput then
    self:backward(input, gradOutput)
    return self.output, self.gradInput
  end
  return self.output
end

-- Parameters and their gradients as two 1-D tensors; every parameter tensor becomes a view
-- into the first, every gradient a view into the second, at the same offsets.
function Module:getParameters()
  local params, grads = self:parameters()
  local p, g = Module.flatten(params), Module.flatten(grads)
  assert(p:nElement() == g:nElement(),
    'getParameters: parameters and gradients do not have the same number of elements ('
    .. p:nElement() .. ' and ' .. g:nElement() .. '); check that they are shared alike')
  for i = 1, #(params or {}) do
    assert(params[i]:storageOffset() == grads[i]:storageOffset(),
      'getParameters: misaligned parameter at ' .. i)
  end
  return p, g
end

-- True when t covers a gap-free block of its storage (any stride order; expanded dims ignored).
local function isCompact(t)
  local dims = {}
  for d = 1, t:nDimension() do
    if t:stride(d) ~= 0 and t:size(d) ~= 1 then dims[#dims + 1] = { t:size(d), t:stride(d) } end
  end
  table.sort(dims, function(a, b) return a[2] > b[2] end)
  local expected = 1
  for i = #dims, 1, -1 do
    if dims[i][2] ~= expected then return false end
    expected = expected * dims[i][1]
  end
  return true
end

-- The maximal runs of ones in a 0/1 byte mask: { {first, length, newFirst}, ... } (1-based).
local function runsOf(mask)
  local p, n = mask:data(), mask:nElement()
  local runs, kept, i = {}, 0, 0
  while i < n do
    if p[i] ~= 0 then
      local j = i
      while j < n and p[j] ~= 0 do j = j + 1 end
      runs[#runs + 1] = { i + 1, j - i, kept + 1 }
      kept = kept + j - i
      i = j
    else
      i = i + 1
    end
  end
  return runs, kept
end

-- Where the element at `offset` of the full buffer lands in the compacted one.
local function compactOffset(runs, offset)
  for _, r in ipairs(runs) do
    if offset >= r[1] and offset < r[1] + r[2] then return offset - r[1] + r[3] end
  end
  return 1
end

-- Copies the storages of `tensors` (each distinct storage once) into one new flat tensor and
-- re-points the tensors into it, keeping their geometry. Storage elements no tensor uses are
-- dropped, which needs every tensor to cover a gap-free block (torch7 asserts the same).
function Module.flatten(tensors)
  if not tensors or #tensors == 0 then return torch.Tensor() end
  local Tensor = tensors[1].new
  local base, total, storages, metas = {}, 0, {}, {}
  for k, t in ipairs(tensors) do
    local st = t:storage()
    if st and base[st] == nil then
      base[st] = total
      storages[#storages + 1] = st
      total = total + st:size()
    end
    metas[k] = st and { offset = base[st] + t:storageOffset(), size = t:size(), stride = t:stride() } or false
  end
  local flat = Tensor(total):zero()
  local mask, compact = torch.ByteTensor(total):zero(), true
  for k, meta in ipairs(metas) do
    if meta and tensors[k]:nElement() > 0 then
      local used = mask.new():set(mask:storage(), meta.offset, meta.size, meta.stride)
      used:fill(1)
      compact = compact and isCompact(used)
    end
  end
  for _, st in ipairs(storages) do
    if st:size() > 0 then flat:narrow(1, base[st] + 1, st:size()):copy(Tensor():set(st)) end
  end
  for k, t in ipairs(tensors) do if metas[k] then t:set() end end   -- let the old storages go
  local runs, kept = runsOf(mask)
  if kept < total then
    assert(compact, 'flatten: cannot gather tensors that are not compact (they leave holes in their storage)')
    local packed = Tensor(kept)
    for _, r in ipairs(runs) do packed:narrow(1, r[3], r[2]):copy(flat:narrow(1, r[1], r[2])) end
    for _, meta in ipairs(metas) do
      if meta then meta.offset = compactOffset(runs, meta.offset) end
    end
    flat = packed
  end
  for k, meta in ipairs(metas) do
    if meta then tensors[k]:set(flat:storage(), meta.offset, meta.size, meta.stride) end
  end
  return flat
end
