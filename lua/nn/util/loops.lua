-- nn's hand-written CPU loops, reached through the op table: perType(name, source) compiles
-- a loop once per element type (backend.cpu.perType), picked by the tensor's type name
-- (loops[torch.typename(t)]); dtype(t) is the element type record of t (its C type, size, name).
local backend = require 'torch.backend'
local dtype = require 'torch.core.dtype'
local check = require 'torch.core.check'

local loops = {}

local byTensor = dtype.byTensorType

function loops.dtype(t) return byTensor[torch.typename(t)] end

function loops.perType(name, source)
  local byDtype = backend.cpu.perType(name, source)
  return setmetatable({}, { __index = function(byName, typename)
    if not byTensor[typename] then   -- a device tensor reaching a CPU loop
      check.error(('%s: %s is not supported (a CPU loop)'):format(name, typename))
    end
    local f = byDtype[byTensor[typename]]
    byName[typename] = f
    return f
  end })
end

return loops
