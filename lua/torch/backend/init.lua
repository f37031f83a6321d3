-- The op tables behind the tensor front end.
--
-- Every tensor method in math/ parses and checks its arguments once (check.lua's messages),
-- resizes its result, then calls one op of its tensor's backend:
--   backend.of(r).unary('exp', r, a)
-- backend.cpu (LuaJIT FFI loops, numpy's ufunc loops, OpenBLAS) and backend.cuda (a marshaller to
-- the array-module code in luabridge/backend/cuda.py) export the same names, listed with their
-- arguments in lua/torch/README.md ("The op table"). Ops receive checked operands of one device,
-- results already sized, dims 1-based; nothing below the front end fails on user input.
-- Each family file (backend/cpu/<family>.lua, backend/cuda/<family>.lua) adds its ops with
-- backend.register(device, ops). An op that a device lacks is a clear error when looked up.
local check = require 'torch.check'

local backend = {}

local function opTable(device)
  return setmetatable({}, { __index = function(_, name)
    check.error(('%s is not available for %s tensors'):format(tostring(name), device))
  end })
end

backend.cpu = opTable('CPU')
backend.cuda = opTable('CUDA')

-- The op table serving tensor t (CUDA types answer _device from their metatable).
function backend.of(t)
  if t._device then return backend.cuda end
  return backend.cpu
end

-- A tensor of t's type and size for an op's intermediate values: one per element type (so one
-- per device too), reused by every op, as ops run one at a time and none keeps it.
local scratches = {}
function backend.scratch(t)
  local s = scratches[t._dt]
  if not s then s = t.new(); scratches[t._dt] = s end
  return s:resizeAs(t)
end

-- Adds the ops of one family to a device's table; a name given twice is a mistake.
function backend.register(device, ops)
  local tbl = backend[device]
  for name, fn in pairs(ops) do
    assert(rawget(tbl, name) == nil, 'backend op registered twice: ' .. device .. '.' .. name)
    rawset(tbl, name, fn)
  end
  return tbl
end

return backend
