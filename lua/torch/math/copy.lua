-- fill, zero and copy (across element types and strides).
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local memory = require 'torch.memory'

local fillKernel = apply.kernel(1, '$1 = v1')
local copyKernel = apply.kernel(2, '$1 = $2')
-- LuaJIT's compiled int64 -> float store yields wrong values (the interpreter's is right): go
-- through a double for Long -> Float
local copyViaDouble = apply.kernel(2, '$1 = tonumber($2)')

torch._method('fill', function(t, v)
  check.number('fill', v, 'value')
  if t._dt.half then return t:copy(torch.FloatTensor():resize(t._sz):fill(v)) end
  fillKernel(t, v)
  return t
end)

-- all-zero bits are 0 in every type, Half included: a contiguous tensor is one memset
torch._method('zero', function(t)
  if apply.isContiguous(t) then
    local n = apply.numel(t)
    if n > 0 then ffi.fill(t._st._ptr + t._off, n * t._dt.size, 0) end
  else
    fillKernel(t, 0)
  end
  return t
end)

-- copy(src): same element count, any shapes, types and strides.
torch._method('copy', function(t, src)
  check.tensorOf('copy', src, 'source')
  if src._device then return src:_copyTo(t) end
  check.sameElements('copy', t, src)
  if apply.numel(t) == 0 then return t end
  if t._dt.half or src._dt.half then
    memory.py.copy_tensor(t, src)
  elseif t._dt.name == 'Float' and src._dt.name == 'Long' then
    copyViaDouble(t, src)
  else
    copyKernel(t, src)
  end
  return t
end)
