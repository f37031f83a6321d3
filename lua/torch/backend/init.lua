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

-- The host's services that no tensor's device picks: the CPU generators' streams (mt19937, for
-- random.lua), the BLAS thread setting (set_threads, threads, cpus, for settings.lua) and numpy's
-- loops over host memory (ufunc_loop, ufunc_reduce, ufunc_unary, ufunc_binary: File.lua's reads,
-- the graph executor's fused CPU loops). They live on the CPU's table.
backend.host = backend.cpu

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

-- Whether t's elements live in host memory (the CPU's): the front end's test before a pass that
-- reads memory itself, whose error says which tensors it takes ("CPU tensors only").
function backend.onHost(t) return not t._device end

-- The name of the tensor type of `kind` ('Byte', 'Long', ...) on t's device.
function backend.typeName(t, kind)
  return t._device and ('torch.Cuda' .. kind .. 'Tensor') or ('torch.' .. kind .. 'Tensor')
end

-- m[name] as a tensor of like's type and size: a module's scratch buffer, reused across calls
-- (the module's clearState drops it).
function backend.moduleScratch(m, name, like)
  if torch.type(m[name]) ~= torch.type(like) then m[name] = like.new() end
  return m[name]:resizeAs(like)
end

-- m._mask: 1 where lo < x (and x < hi when hi is given), else 0, as a tensor of x's type.
-- The compares go to byte buffers first (m._above, m._below): every step runs as a vectorized
-- loop.
function backend.mask(m, x, lo, hi)
  local byteType = backend.typeName(x, 'Byte')
  if torch.type(m._above) ~= byteType then
    m._above, m._below = torch.getmetatable(byteType).new(), torch.getmetatable(byteType).new()
  end
  if torch.type(m._mask) ~= torch.type(x) then m._mask = x.new() end
  torch.gt(m._above, x, lo)
  if hi then m._above:cmul(torch.lt(m._below, x, hi)) end
  return m._mask:resize(x:size()):copy(m._above)
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

-- Ops a device lacks, by name: each raises the error of a missing op when called, so that both
-- devices' tables hold the same names (the front end's checks reject such tensors first).
function backend.lacks(device, names)
  local ops = {}
  for _, name in ipairs(names) do
    ops[name] = function() check.error(('%s is not available for %s tensors'):format(name, device:upper())) end
  end
  backend.register(device, ops)
end

-- The devices, in the order they load (backend.load).
backend.devices = {}

-- An op that the front end builds once (a module's elementwise loop, from its body): build(ops)
-- is called with each device's table, now and for a device loaded later, and returns that
-- device's op (built with the device's own builders, e.g. ops.nn_loop) or nil: then the
-- device's own op of that name where one of its families has it, else one raising the error of
-- an op the device lacks. Defining a name again (a module file run again) replaces its ops.
local defined, definedOrder = {}, {}
local function defineOn(device, name, build)
  local tbl = backend[device]
  local op = build(tbl)
  if op ~= nil then
    rawset(tbl, name, op)
  elseif rawget(tbl, name) == nil then
    backend.lacks(device, { name })
  end
end
function backend.define(name, build)
  if defined[name] == nil then definedOrder[#definedOrder + 1] = name end
  defined[name] = build
  for _, device in ipairs(backend.devices) do defineOn(device, name, build) end
end

-- The op families, one file of each name in backend/cpu/ and backend/cuda/, loaded by each
-- device's init.lua in this order: the tensor library's (front end: torch/math/<family>.lua),
-- then nn's (front end: the nn modules).
backend.families = {
  'pointwise', 'reduce', 'products', 'index', 'sort', 'join', 'random', 'lapack', 'construct', 'conv',
  'nn', 'nn_conv', 'nn_pool', 'nn_batchnorm', 'nn_temporal', 'nn_pad', 'nn_resample', 'nn_lrn',
  'nn_fractional', 'nn_sparse', 'nn_pointwise', 'nn_loss', 'nn_plan', 'nn_chain',
}

-- Loads a device's op families (backend/<device>/init.lua) once; returns what its init.lua
-- returns (CUDA: its tensor types and marshaller, for serialization and cutorch). torch's
-- init.lua loads the CPU before the front end's methods and CUDA after them (the CUDA types
-- take the front end's methods).
local devices = { cpu = 'torch.backend.cpu', cuda = 'torch.backend.cuda' }
function backend.load(device)
  local loaded = package.loaded[devices[device] or error('backend.load: no device ' .. tostring(device))]
  local result = require(devices[device])
  if not loaded then
    backend.devices[#backend.devices + 1] = device
    for _, name in ipairs(definedOrder) do defineOn(device, name, defined[name]) end
  end
  return result
end

return backend
