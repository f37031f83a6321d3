-- torchx.recursive*: tensor operations over tensors nested in tables.

-- raised for the caller of the function that calls it
local function nestingError(name, t1, t2)
  error(('torchx.%s: expecting nested tensors or tables, got %s and %s')
    :format(name, torch.type(t1), torch.type(t2)), 3)
end

-- walk(t1, t2, ...): t1 takes t2's nesting (a non-table t1 facing a table becomes {t1}), and
-- leaf(t1, t2, ...) gives each of t1's tensors. Returns t1, t2.
local function pairwise(name, leaf)
  local function walk(t1, t2, ...)
    if torch.type(t2) == 'table' then
      t1 = torch.type(t1) == 'table' and t1 or { t1 }
      for k in pairs(t2) do t1[k], t2[k] = walk(t1[k], t2[k], ...) end
    elseif torch.isTensor(t2) then
      t1 = leaf(t1, t2, ...)
    else
      nestingError(name, t1, t2)
    end
    return t1, t2
  end
  return walk
end

-- walk(t, ...): leaf(tensor, ...) at each tensor of t, into t itself, or a new nesting if fresh.
local function map(name, leaf, fresh)
  local function walk(t, ...)
    if torch.type(t) == 'table' then
      local out = fresh and {} or t
      for k, v in pairs(t) do out[k] = walk(v, ...) end
      return out
    elseif torch.isTensor(t) then
      return leaf(t, ...)
    end
    error(('torchx.%s: expecting a tensor or a table thereof, got %s'):format(name, torch.type(t)), 2)
  end
  return walk
end

local function orNew(t1, t2) return torch.isTensor(t1) and t1 or t2.new() end

torchx.recursiveResizeAs = pairwise('recursiveResizeAs', function(t1, t2) return orNew(t1, t2):resizeAs(t2) end)
torchx.recursiveSet = pairwise('recursiveSet', function(t1, t2) return orNew(t1, t2):set(t2) end)
torchx.recursiveCopy = pairwise('recursiveCopy', function(t1, t2) return orNew(t1, t2):resizeAs(t2):copy(t2) end)
torchx.recursiveAdd = pairwise('recursiveAdd', function(t1, t2)
  if not torch.isTensor(t1) then nestingError('recursiveAdd', t1, t2) end
  return t1:add(t2)
end)
local indexInto = pairwise('recursiveIndex', function(res, src, dim, indices) return orNew(res, src):index(src, dim, indices) end)
function torchx.recursiveIndex(res, src, dim, indices) return (indexInto(res, src, dim, indices)) end

torchx.recursiveNormal = map('recursiveNormal', function(t) return t:normal() end)
torchx.recursiveFill = map('recursiveFill', function(t, val) return t:fill(val) end)
torchx.recursiveNew = map('recursiveNew', function(t) return t.new() end, true)
torchx.recursiveSub = map('recursiveSub', function(t, start, stop) return t:sub(start, stop) end, true)
torchx.recursiveSize = map('recursiveSize', function(t, excludedim)
  local size = t:size():totable()
  if excludedim then table.remove(size, excludedim) end
  return size
end, true)

function torchx.recursiveSum(t)
  if torch.type(t) == 'table' then
    local sum = 0
    for _, v in pairs(t) do sum = sum + torchx.recursiveSum(v) end
    return sum
  elseif torch.isTensor(t) then
    return t:sum()
  end
  error('torchx.recursiveSum: expecting a tensor or a table thereof, got ' .. torch.type(t), 2)
end

-- true when t1 has t2's nesting and tensors within 1e-5 of t2's
function torchx.recursiveTensorEq(t1, t2)
  if torch.type(t2) == 'table' then
    if torch.type(t1) ~= 'table' then return false end
    for k in pairs(t2) do
      if not torchx.recursiveTensorEq(t1[k], t2[k]) then return false end
    end
    return true
  elseif torch.isTensor(t1) and torch.isTensor(t2) then
    return (t1 - t2):abs():max() < 0.00001
  end
  nestingError('recursiveTensorEq', t1, t2)
end

-- the tensors of the array part converted to type_str; other values kept
function torchx.recursiveType(param, type_str)
  if torch.type(param) == 'table' then
    for i = 1, #param do param[i] = torchx.recursiveType(param[i], type_str) end
  elseif torch.isTensor(param) then
    param = param:type(type_str)
  end
  return param
end

-- the size of the first dimension of the first tensor
function torchx.recursiveBatchSize(input)
  if torch.type(input) == 'table' then return torchx.recursiveBatchSize(input[1]) end
  if not torch.isTensor(input) then
    error('torchx.recursiveBatchSize: expecting a tensor or a table thereof, got ' .. torch.type(input), 2)
  end
  return input:size(1)
end
