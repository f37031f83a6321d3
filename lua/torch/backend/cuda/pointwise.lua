-- The CUDA elementwise ops (fill copy unary binary add addcmul addcdiv clamp lerp): marshallers
-- to the Python ops of the same names (luabridge/backend/cuda.py), the bitwise family and the
-- shifts among binary's. The CUDA tensor types take the front-end methods of math/pointwise.lua,
-- compare.lua and copy.lua, which check the arguments and size the results for both devices.
local C = require 'torch.backend.cuda.core'
local backend = require 'torch.backend'
local call, Methods = C.call, C.Methods

local function op(name) return function(...) call(name, ...) end end

backend.register('cuda', {
  fill = op('fill'),
  -- either side may be on the host
  copy = function(r, a)
    if not r._device then return call('download', r, a) end
    call(a._device and 'copy' or 'upload', r, a)
  end,
  unary = op('unary'), binary = op('binary'), add = op('add'), addcmul = op('addcmul'),
  addcdiv = op('addcdiv'), clamp = op('clamp'), lerp = op('lerp'),
  -- torch.elementwise's blocked programs are the CPU's: CUDA declines, the caller runs its ops
  elementwise = function() return false end,
})

-- The front-end methods, for the CUDA types (torch.<name> is the front end's for both devices).
for _, name in ipairs {
  'fill', 'zero', 'copy',
  'exp', 'log', 'log1p', 'sqrt', 'rsqrt', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh',
  'tanh', 'sigmoid', 'floor', 'ceil', 'round', 'trunc', 'frac', 'cinv', 'abs', 'sign', 'neg',
  'mul', 'div', 'fmod', 'mod', 'remainder', 'cmul', 'cdiv', 'cpow', 'cfmod', 'cmod', 'cremainder', 'atan2',
  'cmax', 'cmin', 'pow', 'add', 'csub', 'addcmul', 'addcdiv', 'clamp', 'lerp',
  'lt', 'le', 'gt', 'ge', 'eq', 'ne',
  'lshift', 'rshift', 'clshift', 'crshift', 'bitand', 'bitor', 'bitxor', 'cbitand', 'cbitor', 'cbitxor',
} do
  Methods[name] = C.Tensor[name]
end
