-- Element types: the C type behind each Tensor/Storage kind and the numpy dtype that owns it.
local ffi = require 'ffi'

local dtype = {}
local specs = {
  { 'Byte',   'unsigned char', 'uint8',   true },
  { 'Char',   'signed char',   'int8',    true },
  { 'Short',  'short',         'int16',   true },
  { 'Int',    'int',           'int32',   true },
  { 'Long',   'int64_t',       'int64',   true },
  { 'Float',  'float',         'float32', false },
  { 'Double', 'double',        'float64', false },
  { 'Half',   'uint16_t',      'float16', false },
}
dtype.list = {}
for id, s in ipairs(specs) do
  local name, ctype, np, integer = s[1], s[2], s[3], s[4]
  local d = {
    id = id,
    name = name,
    ctype = ctype,
    np = np,
    integer = integer,
    half = name == 'Half',
    int64 = name == 'Long',       -- elements read back as int64 cdata: convert with tonumber
    ptr = ffi.typeof(ctype .. '*'),
    size = ffi.sizeof(ctype),
    tensor = 'torch.' .. name .. 'Tensor',
    storage = 'torch.' .. name .. 'Storage',
  }
  dtype.list[id] = d
  dtype[name] = d
end
-- Integer ranges, for messages and saturating checks.
dtype.Byte.min, dtype.Byte.max = 0, 255
dtype.Char.min, dtype.Char.max = -128, 127
dtype.Short.min, dtype.Short.max = -32768, 32767
dtype.Int.min, dtype.Int.max = -2147483648, 2147483647

return dtype
