-- CUDA sorting (argument forms of core.lua).
local C = require 'torch.backend.cuda.core'
local sortedOut = C.sortedOut
local check, call, copyArray, def, withSize = C.check, C.call, C.copyArray, C.def, C.withSize

-- sorting: values and CudaLongTensor indices along a dim (the last one by default)

local function lastDim(op, s, d)
  if #s._sz == 0 then check.error(op .. ': the tensor is empty (no dimensions)') end
  d = d or #s._sz
  check.dim(op, s, d)
  return d
end

def('sort', { 'r r S n=nil b=false', function(r, idx, s, d, desc)
  d = lastDim('sort', s, d)
  r, idx = sortedOut('sort', r, idx, s, copyArray(s._sz))
  call('sort', r, idx, s, d - 1, desc)
  return r, idx
end })

def('topk', { 'r r S n=1 n=nil b=false b=false', function(r, idx, s, k, d, largest)
  d = lastDim('topk', s, d)
  if k < 1 or k > s._sz[d] or k ~= math.floor(k) then
    check.error(('topk: k = %s out of range for dimension %d of size %d'):format(tostring(k), d, s._sz[d]))
  end
  r, idx = sortedOut('topk', r, idx, s, withSize(s, d, k))
  call('topk', r, idx, s, k, d - 1, largest)
  return r, idx
end })

local function kth(op, r, idx, s, k, d)
  d = lastDim(op, s, d)
  k = k or math.floor((s._sz[d] + 1) / 2)   -- median: the lower middle
  if k < 1 or k > s._sz[d] or k ~= math.floor(k) then
    check.error(('%s: k = %s out of range for dimension %d of size %d'):format(op, tostring(k), d, s._sz[d]))
  end
  r, idx = sortedOut(op, r, idx, s, withSize(s, d, 1))
  call('kthvalue', r, idx, s, k, d - 1)
  return r, idx
end
def('kthvalue', { 'r r S n n=nil', function(r, idx, s, k, d) return kth('kthvalue', r, idx, s, k, d) end })
def('median', { 'r r S n=nil', function(r, idx, s, d) return kth('median', r, idx, s, nil, d) end })
