-- nn's hand-written CPU loops, reached through the op table: perType(name, source) compiles
-- a loop once per element type (backend.cpu.perType), picked by the tensor's type name
-- (loops[torch.typename(t)]); dtype(t) is the element type record of t (its C type, size, name).
local backend = require 'torch.backend'
local dtype = require 'torch.dtype'

local loops = {}

local byTensor = {}
for _, dt in ipairs(dtype.list) do byTensor[dt.tensor] = dt end

function loops.dtype(t) return byTensor[torch.typename(t)] end

function loops.perType(name, source)
  local byDtype = backend.cpu.perType(name, source)
  return setmetatable({}, { __index = function(byName, typename)
    local f = byDtype[assert(byTensor[typename], typename)]
    byName[typename] = f
    return f
  end })
end

return loops
