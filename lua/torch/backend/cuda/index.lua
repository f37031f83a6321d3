-- CUDA indexing (argument forms of core.lua).
local C = require 'torch.backend.cuda.core'
local torch, check, numel, sizestr, call, copyArray = C.torch, C.check, C.numel, C.sizestr, C.call, C.copyArray
local dtypes, def, result, sized, checkLong, checkRange = C.dtypes, C.def, C.result, C.sized, C.checkLong, C.checkRange
local checkIndexVector, checkMask, withSize = C.checkIndexVector, C.checkMask, C.withSize

-- indexing

-- index(dim, idx): the slices idx along dim (a new tensor, or res:index(src, dim, idx))
def('index', { 'r S n T', function(r, s, d, idx)
  if #s._sz == 0 then check.error('index: the source tensor is empty') end
  checkIndexVector('index', idx, s, d)
  r = sized('index', r, s, withSize(s, d, idx._sz[1]))
  call('index_select', r, s, d - 1, idx)
  return r
end })

for name, op in pairs { indexCopy = 'index_copy', indexAdd = 'index_add' } do
  def(name, { 'T n T T', function(t, d, idx, src)
    checkIndexVector(name, idx, t, d)
    check.tensorOf(name, src, 'source')
    check.sameType(name, t, src)
    check.dim(name, src, d)
    if src._sz[d] ~= idx._sz[1] then
      check.error(('%s: %d indices but the source has size %d in dimension %d'):format(name, idx._sz[1], src._sz[d], d))
    end
    if numel(src) / math.max(src._sz[d], 1) ~= numel(t) / math.max(t._sz[d], 1) then
      check.error(('%s: slices of the destination (%s) and the source (%s) along dimension %d differ in size'):format(
        name, sizestr(t), sizestr(src), d))
    end
    call(op, t, d - 1, idx, src)
    return t
  end })
end

def('indexFill', { 'T n T n', function(t, d, idx, v)
  checkIndexVector('indexFill', idx, t, d)
  call('index_fill', t, d - 1, idx, v)
  return t
end })

-- gather / scatter: an index of the operand's dims picks positions along dim d.
-- a and b have the same dimension count and sizes except along d.
local function checkAligned(op, a, b, d, what)
  if #a._sz ~= #b._sz then check.error(('%s: %s must have %d dimensions, got %s'):format(op, what, #a._sz, sizestr(b))) end
  for k = 1, #a._sz do
    if k ~= d and a._sz[k] ~= b._sz[k] then
      check.error(('%s: %s (%s) must match %s in every dimension but %d'):format(op, what, sizestr(b), sizestr(a), d))
    end
  end
end

local function checkAlong(op, t, d, idx)
  check.dim(op, t, d)
  checkLong(op, idx)
  checkAligned(op, t, idx, d, 'the index')
  checkRange(op, idx, t, d)
end

def('gather', { 'r S n T', function(r, s, d, idx)
  checkAlong('gather', s, d, idx)
  r = sized('gather', r, s, copyArray(idx._sz))
  call('gather', r, s, d - 1, idx)
  return r
end })

def('scatter',
  { 'T n T T', function(t, d, idx, src)
    checkAlong('scatter', t, d, idx)
    check.sameType('scatter', t, src)
    checkAligned('scatter', idx, src, d, 'the source')
    if src._sz[d] < idx._sz[d] then
      check.error(('scatter: the source (%s) is smaller than the index (%s) in dimension %d'):format(
        sizestr(src), sizestr(idx), d))
    end
    call('scatter', t, d - 1, idx, src)
    return t
  end },
  { 'T n T n', function(t, d, idx, v)
    checkAlong('scatter', t, d, idx)
    call('scatter', t, d - 1, idx, v)
    return t
  end })

def('maskedFill', { 'T T n', function(t, mask, v)
  checkMask('maskedFill', mask, t)
  call('masked_fill', t, mask, v)
  return t
end })

def('maskedCopy', { 'T T T', function(t, mask, src)
  checkMask('maskedCopy', mask, t)
  check.sameType('maskedCopy', t, src)
  local n = call('count_nonzero', mask)
  if n > numel(src) then
    check.error(('maskedCopy: the mask has %d ones but the source only %d elements'):format(n, numel(src)))
  end
  call('masked_copy', t, mask, src)
  return t
end })

def('maskedSelect', { 'r S T', function(r, s, mask)
  checkMask('maskedSelect', mask, s)
  r = sized('maskedSelect', r, s, { call('count_nonzero', mask) })
  call('masked_select', r, s, mask)
  return r
end })

def('nonzero', { 'r S', function(r, s)
  r = r or torch.CudaLongTensor()
  if r._dt ~= dtypes.Long then check.error('nonzero: the result must be a torch.CudaLongTensor') end
  r:resize(call('count_nonzero', s), #s._sz)
  call('nonzero', r, s)
  return r
end })
