-- The op tables behind the tensor front end.
--
-- Every tensor method in math/ parses and checks its arguments once (check.lua's messages),
-- resizes its result, then calls one op of its tensor's backend:
--   backend.of(r).unary('exp', r, a)
-- backend.cpu (LuaJIT FFI loops, numpy's ufunc loops, OpenBLAS) and backend.cuda (a marshaller to
-- the array-module code in luabridge/backend/cuda.py) export the same names, listed with their
-- arguments in lua/torch/README.md ("The op table"). Ops receive checked operands of one device,
-- results already sized, dims 1-based; nothing below the front end fails on user input.
-- Each family file (backend/cpu/<family>.lua, backend/cuda/<family>.lua: the same names on both
-- devices, backend.families) adds its ops with backend.register(device, ops); a family with no ops
-- on a device says so in that device's file. An op that a device lacks is a clear error when
-- looked up. Only this file names the devices' folders: the front end (math/, nn, ...) reaches
-- the ops through backend.of(t) and the helpers anyone may use through torch.core.
local check = require 'torch.core.check'

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

-- The op families, one file of each name in backend/cpu/ and backend/cuda/, loaded by each
-- device's init.lua in this order: the tensor library's (front end: torch/math/<family>.lua),
-- then nn's (front end: the nn modules).
backend.families = {
  'pointwise', 'reduce', 'products', 'index', 'sort', 'join', 'random', 'lapack', 'construct', 'conv',
  'nn', 'nn_conv', 'nn_pool', 'nn_batchnorm', 'nn_temporal', 'nn_pad', 'nn_resample', 'nn_lrn',
  'nn_fractional', 'nn_sparse',
}

-- Loads a device's op families (backend/<device>/init.lua) once; returns what its init.lua
-- returns (CUDA: its tensor types and marshaller, for serialization and cutorch). torch's
-- init.lua loads the CPU before the front end's methods and CUDA after them (the CUDA types
-- take the front end's methods).
local devices = { cpu = 'torch.backend.cpu', cuda = 'torch.backend.cuda' }
function backend.load(device)
  return require(devices[device] or error('backend.load: no device ' .. tostring(device)))
end

return backend
