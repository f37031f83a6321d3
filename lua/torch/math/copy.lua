-- fill, zero and copy (across element types, strides and devices): front ends over the op
-- table's fill and copy.
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'

torch._method('fill', function(t, v)
  check.number('fill', v, 'value')
  backend.of(t).fill(t, v)
  return t
end)

torch._method('zero', function(t)
  backend.of(t).fill(t, 0)
  return t
end)

-- copy(src): same element count, any shapes, types and strides. A copy to or from the device
-- is the CUDA table's.
torch._method('copy', function(t, src)
  check.tensorOf('copy', src, 'source')
  check.sameElements('copy', t, src)
  backend.of(src._device and src or t).copy(t, src)
  return t
end)
