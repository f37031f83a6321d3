-- Comparisons (lt le gt ge eq ne), cmax and cmin, and the bitwise family (lshift rshift bitand
-- bitor bitxor, with a tensor: clshift crshift cbitand cbitor cbitxor), as torch7.
local torch = require 'torch.env'
local dtype = require 'torch.dtype'
local check = require 'torch.check'
local P = require 'torch.math.pointwise'

local isTensor, ALL, INTEGERS = torch.isTensor, P.ALL, P.INTEGERS

------------------------------------------------------------------------------------------------
-- comparisons: a 0/1 ByteTensor, or (torch7's lt(resT, a, b) forms) a result of a's type

local comparisons = {
  -- name   Lua   numpy ufunc
  { 'lt',   '<',  'less' },
  { 'le',   '<=', 'less_equal' },
  { 'gt',   '>',  'greater' },
  { 'ge',   '>=', 'greater_equal' },
  { 'eq',   '==', 'equal' },
  { 'ne',   '~=', 'not_equal' },
}

for _, c in ipairs(comparisons) do
  local name = c[1]
  local withValue = P.mapScalar('compare', ('$1 = ($2 %s v1) and 1 or 0'):format(c[2]), c[3], nil, true)
  local withTensor = P.map2('compare', ('$1 = ($2 %s $3) and 1 or 0'):format(c[2]), c[3], true)
  P.define(name, function(r, a, b, extra)
    if not isTensor(a) or not (isTensor(b) or type(b) == 'number') or extra ~= nil then return nil end
    P.supports(name, ALL, a)
    local v
    if isTensor(b) then P.partner(name, a, b) else v = P.toReal(a._dt, b) end
    if r == nil then
      r = torch.ByteTensor()
    elseif r._dt ~= dtype.Byte and r._dt ~= a._dt then
      check.error(('%s: the result must be a torch.ByteTensor or a %s, got %s'):format(
        name, torch.typename(a), torch.typename(r)))
    end
    r:resizeAs(a)
    if v then withValue(r, a, v) else withTensor(r, a, b) end
    return r
  end, '[res,] tensor, value | [res,] tensor1, tensor2', nil, true)
end

------------------------------------------------------------------------------------------------
-- cmax and cmin, with a tensor or a number

-- math.max(x, y) is x > y and x or y (maxsd): torch7's rule, nan included. int64 cdata have no
-- math.max. numpy's fmax / fmin agree with torch7 for any value v but nan.
local extremes = {
  { 'cmax', 'math.max', '>', 'fmax' },
  { 'cmin', 'math.min', '<', 'fmin' },
}
for _, e in ipairs(extremes) do
  local name, fn, op = e[1], e[2], e[3]
  local withTensor = P.map2(name, {
    F = ('$1 = %s($2, $3)'):format(fn),
    I = ('$1 = %s($2, $3)'):format(fn),
    L = ('local x, y = $2, $3; if x %s y then $1 = x else $1 = y end'):format(op) })
  local withValue = P.mapScalar(name, {
    F = ('$1 = %s($2, v1)'):format(fn),
    I = ('$1 = %s($2, v1)'):format(fn),
    L = ('local x = $2; if x %s v1 then $1 = x else $1 = v1 end'):format(op) },
    e[4], 'array')
  P.define(name, function(r, a, b, extra)
    if not isTensor(a) or not (isTensor(b) or type(b) == 'number') or extra ~= nil then return nil end
    P.supports(name, ALL, a)
    local tensor = isTensor(b)
    if tensor then P.partner(name, a, b) else b = P.toReal(a._dt, b) end
    r = P.result(name, r, a):resizeAs(a)
    if tensor then withTensor(r, a, b) else withValue(r, a, b) end
    return r
  end, '[res,] tensor1, tensor2 | [res,] tensor, value')
end

------------------------------------------------------------------------------------------------
-- shifts (Float and Double: times or over 2^v, as torch7) and bitwise and, or, xor

local function pow2(v) return 2 ^ v end

P.scalarOps {
  -- name       types     kernel bodies                                numpy ufunc  key     Float/Double value
  { 'lshift',   ALL,      { F = '$2 * v1', I = 'bit.lshift($2, v1)' }, 'multiply', 'shift', pow2 },
  -- C shifts the unsigned value: v2 masks it to the type's width (int64 cdata shift logically)
  { 'rshift',   ALL,      { F = '$2 / v1', I = 'bit.rshift(bit.band($2, v2), v1)', L = 'bit.rshift($2, v1)' },
                                                                         'divide',   'shift', pow2 },
  { 'bitand',   INTEGERS, 'bit.band($2, v1)' },
  { 'bitor',    INTEGERS, 'bit.bor($2, v1)' },
  { 'bitxor',   INTEGERS, 'bit.bxor($2, v1)' },
}

P.binaryOps {
  { 'clshift',  ALL,      { F = '$2 * 2 ^ $3', I = 'bit.lshift($2, $3)', L = 'bit.lshift($2, tonumber($3))' } },
  { 'crshift',  ALL,      { F = '$2 / 2 ^ $3', I = 'bit.rshift(bit.band($2, v1), $3)', L = 'bit.rshift($2, tonumber($3))' } },
  { 'cbitand',  INTEGERS, 'bit.band($2, $3)' },
  { 'cbitor',   INTEGERS, 'bit.bor($2, $3)' },
  { 'cbitxor',  INTEGERS, 'bit.bxor($2, $3)' },
}
