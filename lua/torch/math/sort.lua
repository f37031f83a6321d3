-- Sorting along a dimension, torch7 style: sort topk kthvalue median mode. Each returns values
-- and a LongTensor of 1-based positions along the dimension (default: the last one).
-- The one front end for every device: arguments parsed and checked, results sized, then one op of
-- the tensor's backend (backend/cpu/sort.lua: stable, NaN last; backend/cuda/sort.lua).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local R = require 'torch.math.reduce'

local function withResults(op, vals, inds, x, ...)
  R.noHalf(op, x)
  vals, inds = R.result(op, vals, x), R.indexResult(op, inds, x)
  return vals, inds, R.apart(vals, R.apart(inds, x)), ...
end

-- ([vals, inds,] x, ...) -> the results (given, or new), x, the rest.
local function operands(op, ...) return withResults(op, R.args2(op, ...)) end

local function dimOf(op, x, dim)
  if #x._sz == 0 then check.error(op .. ': the tensor is empty (no dimensions)') end
  if dim == nil then dim = #x._sz end
  return check.dim(op, x, dim)
end

-- dimOf, for ops that need an element along dim.
local function filledDimOf(op, x, dim)
  dim = dimOf(op, x, dim)
  if x._sz[dim] == 0 then check.error(('%s: dimension %d has size 0'):format(op, dim)) end
  return dim
end

local function checkK(op, x, dim, k)
  check.number(op, k, 'k')
  local n = x._sz[dim]
  if k < 1 or k > n or k ~= math.floor(k) then
    check.error(('%s: k = %s out of range for dimension %d of size %d'):format(op, tostring(k), dim, n))
  end
end

-- sort([vals, inds,] x [,dim] [,descending])
R.define('sort', function(...)
  local vals, inds, x, dim, descending = operands('sort', ...)
  if type(dim) == 'boolean' then dim, descending = nil, dim end
  dim = dimOf('sort', x, dim)
  vals:resize(x:size())
  inds:resize(x:size())
  backend.of(x).sort(vals, inds, x, dim, descending == true)
  return vals, inds
end)

-- topk([vals, inds,] x [,k = 1] [,dim] [,largest = false] [,sorted]): the k smallest (or largest)
-- along dim. They always come sorted (smallest or largest first).
R.define('topk', function(...)
  local vals, inds, x, k, dim, largest = operands('topk', ...)
  if type(k) == 'boolean' then k, dim, largest = 1, nil, k
  elseif type(dim) == 'boolean' then dim, largest = nil, dim end
  k = k or 1
  dim = dimOf('topk', x, dim)
  checkK('topk', x, dim, k)
  vals:resize(R.sizesWith(x, dim, k))
  inds:resize(R.sizesWith(x, dim, k))
  backend.of(x).topk(vals, inds, x, k, dim, largest == true)
  return vals, inds
end)

-- The k-th smallest along dim (size 1 there) and its position.
local function kth(vals, inds, x, k, dim)
  vals:resize(R.sizesWith(x, dim, 1))
  inds:resize(R.sizesWith(x, dim, 1))
  backend.of(x).kthvalue(vals, inds, x, k, dim)
  return vals, inds
end

-- kthvalue([vals, inds,] x, k [,dim])
R.define('kthvalue', function(...)
  local vals, inds, x, k, dim = operands('kthvalue', ...)
  dim = dimOf('kthvalue', x, dim)
  checkK('kthvalue', x, dim, k)
  return kth(vals, inds, x, k, dim)
end)

-- median([vals, inds,] x [,dim]): the middle element, the lower one for an even count.
R.define('median', function(...)
  local vals, inds, x, dim = operands('median', ...)
  dim = filledDimOf('median', x, dim)
  return kth(vals, inds, x, math.floor((x._sz[dim] - 1) / 2) + 1, dim)
end)

-- mode([vals, inds,] x [,dim]): the most frequent value (the smallest among equally frequent
-- ones) and the position of its last occurrence.
R.define('mode', function(...)
  local vals, inds, x, dim = operands('mode', ...)
  dim = filledDimOf('mode', x, dim)
  vals:resize(R.sizesWith(x, dim, 1))
  inds:resize(R.sizesWith(x, dim, 1))
  backend.of(x).mode(vals, inds, x, dim)
  return vals, inds
end)
