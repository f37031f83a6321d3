-- rnn.recursive*: element-wise helpers over tensors nested in tables (hidden states, gradients).
-- Each pair helper builds the first argument to mirror the second and returns both.
local rnn = rnn

local function nestingError(a, b)
  error(('rnn: expecting nested tensors or tables. Got %s and %s instead'):format(torch.type(a), torch.type(b)), 3)
end

-- Walks t2; leaf(t1, t2) makes the new t1 for each tensor of t2.
local function pairWalk(name, leaf)
  local walk
  walk = function(t1, t2)
    if torch.type(t2) == 'table' then
      t1 = torch.type(t1) == 'table' and t1 or { t1 }
      for key in pairs(t2) do t1[key], t2[key] = walk(t1[key], t2[key]) end
    elseif torch.isTensor(t2) then
      t1 = leaf(t1, t2)
    else
      nestingError(t1, t2)
    end
    return t1, t2
  end
  rnn[name] = walk
end

local function tensorOr(t1, t2) return torch.isTensor(t1) and t1 or t2.new() end
pairWalk('recursiveResizeAs', function(t1, t2) return tensorOr(t1, t2):resizeAs(t2) end)
pairWalk('recursiveSet', function(t1, t2) return tensorOr(t1, t2):set(t2) end)
pairWalk('recursiveCopy', function(t1, t2) return tensorOr(t1, t2):resizeAs(t2):copy(t2) end)
pairWalk('recursiveAdd', function(t1, t2)
  if not torch.isTensor(t1) then nestingError(t1, t2) end
  return t1:add(t2)
end)

-- Walks one nested value, replacing each tensor by leaf(tensor).
local function mapTensors(t, leaf)
  if torch.type(t) == 'table' then
    for key in pairs(t) do t[key] = mapTensors(t[key], leaf) end
    return t
  elseif torch.isTensor(t) then
    return leaf(t)
  end
  error(('rnn: expecting tensor or table thereof. Got %s instead'):format(torch.type(t)), 3)
end

function rnn.recursiveNormal(t) return mapTensors(t, function(x) return x:normal() end) end
function rnn.recursiveFill(t, value) return mapTensors(t, function(x) return x:fill(value) end) end

function rnn.recursiveTensorEq(t1, t2)
  if torch.type(t2) == 'table' then
    if torch.type(t1) ~= 'table' then return false end
    for key in pairs(t2) do
      if not rnn.recursiveTensorEq(t1[key], t2[key]) then return false end
    end
    return true
  elseif torch.isTensor(t1) and torch.isTensor(t2) then
    return (t1 - t2):abs():max() < 0.00001
  end
  nestingError(t1, t2)
end

-- Converts tensors in the array part to type_str; other values are kept as they are.
function rnn.recursiveType(param, type_str)
  if torch.type(param) == 'table' then
    for i = 1, #param do param[i] = rnn.recursiveType(param[i], type_str) end
    return param
  end
  return torch.isTensor(param) and param:type(type_str) or param
end

function rnn.recursiveSum(t)
  if torch.isTensor(t) then return t:sum() end
  if torch.type(t) ~= 'table' then
    error(('rnn: expecting tensor or table thereof. Got %s instead'):format(torch.type(t)), 2)
  end
  local sum = 0
  for _, v in pairs(t) do sum = sum + rnn.recursiveSum(v) end
  return sum
end

function rnn.recursiveNew(t)
  if torch.isTensor(t) then return t.new() end
  if torch.type(t) ~= 'table' then
    error(('rnn: expecting tensor or table thereof. Got %s instead'):format(torch.type(t)), 2)
  end
  local copy = {}
  for key, v in pairs(t) do copy[key] = rnn.recursiveNew(v) end
  return copy
end
