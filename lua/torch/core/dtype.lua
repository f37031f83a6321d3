-- Element types: the rows of torch/elementtypes.lua (the table every layer reads, Python's too)
-- with what the FFI needs, by position (dtype.list) and by name (dtype.Float).
local ffi = require 'ffi'

local dtype = { list = {}, byTensorType = {} }
for id, row in ipairs(require 'torch.elementtypes') do
  local d = {
    id = id,
    name = row.name,
    cuda = row.cuda,
    ctype = row.ctype,
    np = row.numpy,
    integer = row.kind == 'integer',
    min = row.min,
    max = row.max,
    half = row.name == 'Half',
    int64 = row.name == 'Long',   -- elements read back as int64 cdata: convert with tonumber
    ptr = ffi.typeof(row.ctype .. '*'),
    size = ffi.sizeof(row.ctype),
    tensor = 'torch.' .. row.name .. 'Tensor',
    storage = 'torch.' .. row.name .. 'Storage',
  }
  dtype.list[id] = d
  dtype[row.name] = d
  dtype.byTensorType[d.tensor] = d   -- 'torch.FloatTensor' -> dtype.Float (CPU types)
end

-- The element type of tensor or storage t (its record above for CPU types; CUDA types have their
-- own, backend/cuda/core.lua's).
function dtype.of(t) return t._dt end

return dtype
