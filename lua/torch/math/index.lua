-- Indexing by masks and index vectors, torch7 style: maskedFill maskedSelect maskedCopy (ByteTensor
-- masks of 0 and 1), index indexCopy indexAdd indexFill (1-D LongTensor of 1-based indices),
-- gather scatter, nonzero. Every index and mask is checked (through the reduction ops of their
-- device) before anything is written; then one op of the tensor's backend does the work
-- (backend/cpu/index.lua, backend/cuda/index.lua). A CUDA tensor also takes indices and masks
-- from the host.
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local numel = require('torch.core.apply').numel
local R = require 'torch.math.reduce'

local isTensor = torch.isTensor

------------------------------------------------------------------------------------------------
-- checks

-- x is a tensor of element type name ('Long', 'Byte') that t's backend reads: on t's device, or
-- on the host for a CUDA t.
local function checkKind(op, t, x, name, what)
  check.tensorOf(op, x, what)
  if x._dt.name == name or (t._device and x._dt.host and x._dt.host.name == name) then return end
  local wanted = t._device and ('torch.%sTensor or torch.Cuda%sTensor'):format(name, name)
                 or ('torch.%sTensor'):format(name)
  check.error(('%s: %s must be a %s, got %s'):format(op, what, wanted, torch.typename(x)))
end

-- A mask for t: bytes (never negative) of 0 and 1, as many as t's elements.
local function checkMask(op, t, mask)
  checkKind(op, t, mask, 'Byte', 'the mask')
  check.sameElements(op, t, mask)
  if numel(mask) > 0 and backend.of(mask).reduce_all('max', mask) > 1 then
    check.error(op .. ': the mask can hold 0 and 1 only')
  end
end

-- The ones of a checked mask: its sum (one pass, as fast as a sum of bytes goes).
local function ones(mask)
  if numel(mask) == 0 then return 0 end
  return backend.of(mask).reduce_all('sum', mask)
end

-- All elements of the index idx lie in [1, size] (size of dimension dim).
local function checkRange(op, idx, dim, size)
  if numel(idx) == 0 then return end
  local lo, hi = backend.of(idx).minmax(idx)
  if lo < 1 or hi > size then
    check.error(('%s: index %d out of range for dimension %d of size %d'):format(
      op, lo < 1 and lo or hi, dim, size))
  end
end

-- A 1-D index into dimension dim of t.
local function checkIndexVector(op, idx, t, dim)
  checkKind(op, t, idx, 'Long', 'the index')
  if #idx._sz ~= 1 then
    check.error(('%s: the index must be a vector (1D), got %s'):format(op, check.sizestr(idx)))
  end
  checkRange(op, idx, dim, t._sz[dim])
end

-- The number of elements in one slice of t along dim.
local function sliceElements(t, dim)
  local n = 1
  for d = 1, #t._sz do if d ~= dim then n = n * t._sz[d] end end
  return n
end

-- dst and src slices along dim match element for element; n indices pick n slices of src.
local function checkSlices(op, dst, dim, idx, src)
  check.tensorOf(op, src, 'source')
  check.sameType(op, dst, src)
  check.dim(op, src, dim)
  if src._sz[dim] ~= idx._sz[1] then
    check.error(('%s: %d indices but the source has size %d in dimension %d'):format(
      op, idx._sz[1], src._sz[dim], dim))
  end
  if sliceElements(dst, dim) ~= sliceElements(src, dim) then
    check.error(('%s: slices of the destination (%s) and the source (%s) along dimension %d differ in size'):format(
      op, check.sizestr(dst), check.sizestr(src), dim))
  end
end

------------------------------------------------------------------------------------------------
-- masks

torch._method('maskedFill', function(t, mask, value)
  R.noHalf('maskedFill', t)
  checkMask('maskedFill', t, mask)
  check.number('maskedFill', value, 'value')
  if numel(t) > 0 then backend.of(t).masked_fill(t, mask, value) end
  return t
end)

-- src:maskedSelect(mask) -> a new 1-D tensor; res:maskedSelect(src, mask) -> res.
R.define('maskedSelect', function(a, b, c)
  local res, src, mask = nil, a, b
  if c ~= nil then res, src, mask = a, b, c end
  check.tensorOf('maskedSelect', src, 'source')
  R.noHalf('maskedSelect', src)
  checkMask('maskedSelect', src, mask)
  res = R.result('maskedSelect', res, src)
  src, mask = R.apart(res, src), R.apart(res, mask)
  res:resize(ones(mask))
  if numel(res) > 0 then backend.of(res).masked_select(res, src, mask) end
  return res
end)

-- Elements where mask is 1 take the next elements of src, in order.
torch._method('maskedCopy', function(t, mask, src)
  R.noHalf('maskedCopy', t)
  checkMask('maskedCopy', t, mask)
  check.tensorOf('maskedCopy', src, 'source')
  check.sameType('maskedCopy', t, src)
  local n = ones(mask)
  if n > numel(src) then
    check.error(('maskedCopy: the mask has %d ones but the source only %d elements'):format(n, numel(src)))
  end
  if n > 0 then backend.of(t).masked_copy(t, mask, src) end
  return t
end)

------------------------------------------------------------------------------------------------
-- index vectors

-- x:index(dim, idx) -> new tensor; res:index(src, dim, idx) -> res. Slices idx[i] of src.
R.define('index', function(a, b, c, d)
  local res, src, dim, idx = nil, a, b, c
  if isTensor(b) then res, src, dim, idx = a, b, c, d end
  check.tensorOf('index', src, 'source')
  R.noHalf('index', src)
  if #src._sz == 0 then check.error('index: the source tensor is empty') end
  check.dim('index', src, dim)
  checkIndexVector('index', idx, src, dim)
  res = R.result('index', res, src)
  src, idx = R.apart(res, src), R.apart(res, idx)
  res:resize(R.sizesWith(src, dim, idx._sz[1]))
  if numel(res) > 0 then backend.of(res).index_select(res, src, dim, idx) end
  return res
end)

-- t:indexCopy(dim, idx, src): slice idx[i] of t = slice i of src.
-- t:indexAdd(dim, idx, src): slice idx[i] of t += slice i of src (repeated indices add up).
for name, op in pairs({ indexCopy = 'index_copy', indexAdd = 'index_add' }) do
  torch._method(name, function(t, dim, idx, src)
    R.noHalf(name, t)
    check.dim(name, t, dim)
    checkIndexVector(name, idx, t, dim)
    checkSlices(name, t, dim, idx, src)
    if numel(t) > 0 and numel(src) > 0 then backend.of(t)[op](t, dim, idx, src) end
    return t
  end)
end

-- t:indexFill(dim, idx, value): slices idx[i] of t = value.
torch._method('indexFill', function(t, dim, idx, value)
  R.noHalf('indexFill', t)
  check.dim('indexFill', t, dim)
  checkIndexVector('indexFill', idx, t, dim)
  check.number('indexFill', value, 'value')
  if numel(t) > 0 and numel(idx) > 0 then backend.of(t).index_fill(t, dim, idx, value) end
  return t
end)

------------------------------------------------------------------------------------------------
-- gather, scatter: an index tensor of the operand's dimension count picks positions along dim

-- a and b have the same dimension count and sizes except along dim.
local function checkAligned(op, a, b, dim, what)
  if #a._sz ~= #b._sz then
    check.error(('%s: %s must have %d dimensions, got %s'):format(op, what, #a._sz, check.sizestr(b)))
  end
  for d = 1, #a._sz do
    if d ~= dim and a._sz[d] ~= b._sz[d] then
      check.error(('%s: %s (%s) must match %s in every dimension but %d'):format(
        op, what, check.sizestr(b), check.sizestr(a), dim))
    end
  end
end

-- idx indexes t along dim: a LongTensor of t's dimension count, in range.
local function checkAlong(op, t, dim, idx)
  check.dim(op, t, dim)
  checkKind(op, t, idx, 'Long', 'the index')
  checkAligned(op, t, idx, dim, 'the index')
  checkRange(op, idx, dim, t._sz[dim])
end

-- gather([res,] src, dim, idx): res (sizes of idx) at position p = src at p with p[dim] = idx[p].
R.define('gather', function(...)
  local res, src, dim, idx = R.args1('gather', ...)
  R.noHalf('gather', src)
  checkAlong('gather', src, dim, idx)
  res = R.result('gather', res, src)
  src, idx = R.apart(res, src), R.apart(res, idx)
  res:resize(idx:size())
  if numel(res) > 0 then backend.of(res).gather(res, src, dim, idx) end
  return res
end)

-- t:scatter(dim, idx, src | value): t at p with p[dim] = idx[q] takes src[q] (or value).
R.define('scatter', function(t, dim, idx, src)
  check.tensorOf('scatter', t, 'destination')
  R.noHalf('scatter', t)
  checkAlong('scatter', t, dim, idx)
  if isTensor(src) then
    check.sameType('scatter', t, src)
    checkAligned('scatter', idx, src, dim, 'the source')
    if src._sz[dim] < idx._sz[dim] then
      check.error(('scatter: the source (%s) is smaller than the index (%s) in dimension %d'):format(
        check.sizestr(src), check.sizestr(idx), dim))
    end
  else
    check.number('scatter', src, 'source value')
  end
  if numel(idx) > 0 then backend.of(t).scatter(t, dim, idx, src) end
  return t
end)

------------------------------------------------------------------------------------------------
-- nonzero([res,] x): a LongTensor N x dim of the 1-based subscripts of the non-zeros, row-major
-- (CudaLongTensor for a CUDA x).

R.define('nonzero', function(...)
  local res, x = R.args1('nonzero', ...)
  R.noHalf('nonzero', x)
  res = R.indexResult('nonzero', res, x)
  x = R.apart(res, x)
  local count = numel(x) > 0 and backend.of(x).count_nonzero(x) or 0
  res:resize(count, #x._sz)
  if count > 0 then backend.of(res).nonzero(res, x) end
  return res
end)
