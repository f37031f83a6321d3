-- The nn families' hand-written CPU loops: perType(name, source) compiles a loop once per
-- element type (apply.perType), picked by the tensor's type name (loops[torch.typename(t)]), so
-- that a device tensor reaching one says which loop it reached; dtype(t) is the element type
-- record of t (its C type, size, name).
local apply = require 'torch.backend.cpu.apply'
local dtype = require 'torch.core.dtype'
local check = require 'torch.core.check'

local loops = {}

local byTensor = dtype.byTensorType

function loops.dtype(t) return byTensor[torch.typename(t)] end

function loops.perType(name, source)
  local byDtype = apply.perType(name, source)
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
