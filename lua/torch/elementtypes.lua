-- The element types, one row each, read by every layer: torch/core/dtype.lua (which adds the FFI
-- types), the CUDA backend (cutorch's type names), File.lua (the typed reads and writes) and, on
-- the Python side, luabridge/core/dtypes.py, which parses this file without running Lua
-- (luabridge/core/lua_table.py, which reads t7format.lua too). Keep it one table constructor of
-- numbers, strings and tables.
--   name    torch7's name (torch.<name>Tensor, torch.<name>Storage)
--   cuda    cutorch's name of the device type (torch.<cuda>Tensor; float's is plain Cuda)
--   ctype   the C type of an element;  numpy  the numpy dtype holding the same values
--   kind    'integer' or 'float';      min, max  an integer type's range where a double holds it
return {
  { name = 'Byte',   cuda = 'CudaByte',   ctype = 'unsigned char', numpy = 'uint8',   kind = 'integer',
    min = 0, max = 255 },
  { name = 'Char',   cuda = 'CudaChar',   ctype = 'signed char',   numpy = 'int8',    kind = 'integer',
    min = -128, max = 127 },
  { name = 'Short',  cuda = 'CudaShort',  ctype = 'short',         numpy = 'int16',   kind = 'integer',
    min = -32768, max = 32767 },
  { name = 'Int',    cuda = 'CudaInt',    ctype = 'int',           numpy = 'int32',   kind = 'integer',
    min = -2147483648, max = 2147483647 },
  { name = 'Long',   cuda = 'CudaLong',   ctype = 'int64_t',       numpy = 'int64',   kind = 'integer' },
  { name = 'Float',  cuda = 'Cuda',       ctype = 'float',         numpy = 'float32', kind = 'float' },
  { name = 'Double', cuda = 'CudaDouble', ctype = 'double',        numpy = 'float64', kind = 'float' },
  { name = 'Half',   cuda = 'CudaHalf',   ctype = 'uint16_t',      numpy = 'float16', kind = 'float' },
}
