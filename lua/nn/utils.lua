-- Helpers shared by modules: recursive operations over tensors and nested tables of tensors,
-- type conversion that keeps storage sharing, views.
nn.utils = {}
local utils = nn.utils

local function expectNested(name, a, b)
  error(('%s: expecting nested tensors or tables, got %s and %s'):format(name, torch.type(a), torch.type(b)), 3)
end

-- Converts param (a tensor, a module, a criterion or a table holding them) to the tensor type
-- `typeName`. tensorCache maps each converted tensor and storage to its conversion, so
-- tensors that shared a storage still share one; pass one cache to several calls
-- (net1:type(t, cache); net2:type(t, cache)) to keep sharing across them.
function utils.recursiveType(param, typeName, tensorCache)
  tensorCache = tensorCache or {}
  if torch.isTensor(param) then
    if torch.typename(param) == typeName then return param end
    local converted = tensorCache[param]
    if converted == nil then
      converted = torch.Tensor():type(typeName)
      local st = param:storage()
      if st then
        local newSt = tensorCache[st]
        if newSt == nil then
          newSt = st:type((typeName:gsub('Tensor', 'Storage')))
          tensorCache[st] = newSt
        end
        converted:set(newSt, param:storageOffset(), param:size(), param:stride())
      end
      tensorCache[param] = converted
    end
    return converted
  end
  if type(param) ~= 'table' or tensorCache[param] == typeName then return param end
  if torch.isTypeOf(param, 'nn.Module') or torch.isTypeOf(param, 'nn.Criterion') then
    param:type(typeName, tensorCache)
  elseif torch.type(param) == 'table' then
    tensorCache[param] = typeName   -- a table met again (cycles, shared tables) is done already
    for k, v in pairs(param) do param[k] = utils.recursiveType(v, typeName, tensorCache) end
  end
  return param
end

-- t1 shaped like t2 (tensors resized, tables filled key by key, extra keys dropped); t1 is
-- made when it is not of the right kind. Returns t1, t2.
function utils.recursiveResizeAs(t1, t2)
  if torch.type(t2) == 'table' then
    t1 = torch.type(t1) == 'table' and t1 or { t1 }
    for k in pairs(t2) do t1[k], t2[k] = utils.recursiveResizeAs(t1[k], t2[k]) end
    for k in pairs(t1) do if t2[k] == nil then t1[k] = nil end end
  elseif torch.isTensor(t2) then
    t1 = torch.isTensor(t1) and t1 or t2.new()
    t1:resize(t2:size())
  else
    expectNested('recursiveResizeAs', t1, t2)
  end
  return t1, t2
end

function utils.recursiveFill(t, value)
  if torch.type(t) == 'table' then
    for k in pairs(t) do t[k] = utils.recursiveFill(t[k], value) end
  elseif torch.isTensor(t) then
    t:fill(value)
  else
    error('recursiveFill: expecting a tensor or a table of them, got ' .. torch.type(t), 2)
  end
  return t
end

-- t1 += scale * t2, element by element through nested tables: recursiveAdd(t1, [scale,] t2).
function utils.recursiveAdd(t1, scale, t2)
  if t2 == nil then
    assert(scale ~= nil, 'recursiveAdd: expecting at least two arguments')
    scale, t2 = 1, scale
  end
  if torch.type(t2) == 'table' then
    t1 = torch.type(t1) == 'table' and t1 or { t1 }
    for k in pairs(t2) do t1[k], t2[k] = utils.recursiveAdd(t1[k], scale, t2[k]) end
  elseif torch.isTensor(t1) and torch.isTensor(t2) then
    t1:add(scale, t2)
  else
    expectNested('recursiveAdd', t1, t2)
  end
  return t1, t2
end

-- t1 becomes a copy of t2 (resized; tensors and tables made as needed). Returns t1, t2.
function utils.recursiveCopy(t1, t2, async)
  if torch.type(t2) == 'table' then
    t1 = torch.type(t1) == 'table' and t1 or { t1 }
    for k in pairs(t2) do t1[k], t2[k] = utils.recursiveCopy(t1[k], t2[k], async) end
  elseif torch.isTensor(t2) then
    t1 = torch.isTensor(t1) and t1 or t2.new()
    t1:resize(t2:size())
    if async and t1.copyAsync then t1:copyAsync(t2) else t1:copy(t2) end
  else
    expectNested('recursiveCopy', t1, t2)
  end
  return t1, t2
end

-- A view of t with a size-1 dimension inserted at dim (default 1):
-- addSingletonDimension([view,] t [, dim]); view is set to it when given.
function utils.addSingletonDimension(...)
  local view, t, dim
  if select('#', ...) < 3 then
    t, dim = ...
  else
    view, t, dim = ...
    assert(torch.isTensor(view), 'addSingletonDimension: output tensor expected, got ' .. torch.type(view))
  end
  assert(torch.isTensor(t), 'addSingletonDimension: input tensor expected, got ' .. torch.type(t))
  dim = dim or 1
  local n = t:dim()
  assert(type(dim) == 'number' and dim >= 1 and dim <= n + 1,
    ('addSingletonDimension: invalid dimension %s for a tensor of %d dimensions'):format(tostring(dim), n))
  local size, stride = torch.LongStorage(n + 1), torch.LongStorage(n + 1)
  for d = 1, n + 1 do
    local src = d < dim and d or d - 1
    if d == dim then
      size[d], stride[d] = 1, 1
    else
      size[d], stride[d] = t:size(src), t:stride(src)
    end
  end
  view = view or t.new()
  view:set(t:storage(), t:storageOffset(), size, stride)
  return view
end

-- output (made when nil) viewing input with the given sizes; input is copied first when it
-- is not contiguous.
function utils.contiguousView(output, input, ...)
  output = output or input.new()
  if input:isContiguous() then
    output:view(input, ...)
  else
    output:resize(input:size()):copy(input)
    output:view(output, ...)
  end
  return output
end

-- Empties self's fields `names`: a tensor v becomes newTensor(v), a table an empty one, any
-- other true value nil.
local function empty(self, names, newTensor)
  for _, name in ipairs(names) do
    local v = self[name]
    if torch.isTensor(v) then
      self[name] = newTensor(v)
    elseif torch.type(v) == 'table' then
      self[name] = {}
    elseif v then
      self[name] = nil
    end
  end
  return self
end

local function emptied(t) return t:set() end
local function fresh(t) return t.new() end

-- Empties the named fields: clear(self, 'a', 'b') or clear(self, {'a', 'b'}). Tensors are
-- resized to nothing in place, tables replaced by empty ones, other values removed.
function utils.clear(self, ...)
  local names = { ... }
  if type(names[1]) == 'table' then names = names[1] end
  return empty(self, names, emptied)
end

-- As clear, but a tensor is replaced by a new empty one of its type and left as it is (it may
-- be shared, e.g. a container's output is its last child's).
function utils.release(self, ...)
  return empty(self, { ... }, fresh)
end

return utils
