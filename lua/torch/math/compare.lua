-- Comparisons (lt le gt ge eq ne), cmax and cmin, and the bitwise family (lshift rshift bitand
-- bitor bitxor, with a tensor: clshift crshift cbitand cbitor cbitxor), as torch7; front ends
-- over the op table's binary op, as pointwise.lua's.
local torch = require 'torch.env'
local dtype = require 'torch.core.dtype'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local P = require 'torch.math.pointwise'

local isTensor, ALL, INTEGERS = torch.isTensor, P.ALL, P.INTEGERS

------------------------------------------------------------------------------------------------
-- comparisons: a 0/1 ByteTensor of a's device, or (torch7's lt(resT, a, b) forms) a result of
-- a's type

-- Whether r's type is the ByteTensor of a's device.
local function isByteOf(r, a)
  local dt = r._dt
  if dt.host then return dt.host == dtype.Byte and a._dt.host ~= nil end
  return dt == dtype.Byte and a._dt.host == nil
end

for _, name in ipairs { 'lt', 'le', 'gt', 'ge', 'eq', 'ne' } do
  P.define(name, function(r, a, b, extra)
    if not isTensor(a) or not (isTensor(b) or type(b) == 'number') or extra ~= nil then return nil end
    P.supports(name, ALL, a)
    if isTensor(b) then P.partner(name, a, b) else b = P.toReal(a._dt, b) end
    if r == nil then
      r = a._device and torch.CudaByteTensor() or torch.ByteTensor()
    elseif not isByteOf(r, a) and r._dt ~= a._dt then
      check.error(('%s: the result must be a %s or a %s, got %s'):format(
        name, a._device and 'torch.CudaByteTensor' or 'torch.ByteTensor', torch.typename(a), torch.typename(r)))
    end
    r:resizeAs(a)
    backend.of(r).binary(name, r, a, b)
    return r
  end, '[res,] tensor, value | [res,] tensor1, tensor2', nil, true)
end

------------------------------------------------------------------------------------------------
-- cmax and cmin, with a tensor or a number

for name, op in pairs { cmax = 'max', cmin = 'min' } do
  P.define(name, function(r, a, b, extra)
    if not isTensor(a) or not (isTensor(b) or type(b) == 'number') or extra ~= nil then return nil end
    P.supports(name, ALL, a)
    if isTensor(b) then P.partner(name, a, b) else b = P.toReal(a._dt, b) end
    r = P.result(name, r, a):resizeAs(a)
    backend.of(r).binary(op, r, a, b)
    return r
  end, '[res,] tensor1, tensor2 | [res,] tensor, value')
end

------------------------------------------------------------------------------------------------
-- shifts (Float and Double: times or over 2^v, as torch7) and bitwise and, or, xor

local function pow2(v) return 2 ^ v end

P.scalarOps {
  -- name       types     binary op                 Float and Double
  { 'lshift',   ALL,      'lshift',   nil,          { 'mul', pow2 } },
  { 'rshift',   ALL,      'rshift',   nil,          { 'div', pow2 } },
  { 'bitand',   INTEGERS, 'bitand' },
  { 'bitor',    INTEGERS, 'bitor' },
  { 'bitxor',   INTEGERS, 'bitxor' },
}

P.binaryOps {
  { 'clshift',  ALL,      'lshift' },
  { 'crshift',  ALL,      'rshift' },
  { 'cbitand',  INTEGERS, 'bitand' },
  { 'cbitor',   INTEGERS, 'bitor' },
  { 'cbitxor',  INTEGERS, 'bitxor' },
}
