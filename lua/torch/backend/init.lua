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
local versions = require 'torch.core.versions'

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

-- Write versions (core/versions.lua): every op is registered wrapped so that the tensors and
-- storages it writes are bumped before it runs (a whole-model plan keeps its blocked weights
-- while their buffer's version stays). writes[name]: the argument positions the op writes (the
-- others only read: a plan's weights read by eager ops keep their version), false for an op
-- writing no tensor memory (reads, builders, settings), or a function(...) bumping what the op
-- writes itself (tensors inside tables). An op not listed bumps every tensor and storage among
-- its arguments: conservative (a bump of memory only read costs at most a plan's cache miss; a
-- write not bumped would leave a plan on stale weights).
local bump, bumpFields = versions.bump, versions.bumpFields
local function one(p) return { p } end
local function two(p, q) return { p, q } end
-- async products (nn_chain.lua's gemm_async worker) write after the op returns: their results
-- are bumped when posted and again when acc_wait has waited for them
local posted, nposted = {}, 0
local function post(t)
  bump(t)
  if t ~= nil then nposted = nposted + 1; posted[nposted] = t end
end
-- the training plans' parameter lists: each step's tensors and its module's (running statistics,
-- gradients)
local function bumpParams(params)
  for _, p in pairs(params) do
    if type(p) == 'table' then
      bumpFields(p)
      if type(p.module) == 'table' then bumpFields(p.module) end
      for _, q in pairs(p) do if type(q) == 'table' and q ~= p.module then bumpFields(q) end end
    end
  end
end
local writes = {
  -- pointwise, reductions, products, indexing, sorting, random, construction
  fill = one(1), copy = one(1), unary = one(2), binary = one(2), add = one(1), addcmul = one(1),
  addcdiv = one(1), clamp = one(1), lerp = one(1),
  elementwise = function(_, tensors) bumpFields(tensors) end,
  reduce_all = false, reduce_dim = one(2), argreduce = two(2, 3), scan = one(2), equal = false,
  minmax = false, dist = false, renorm = one(1), gemm = one(1), dot = false,
  index_select = one(1), index_copy = one(1), index_add = one(1), index_fill = one(1), gather = one(1),
  scatter = one(1), masked_fill = one(1), masked_copy = one(1), masked_select = one(1),
  count_nonzero = false, nonzero = one(1),
  sort = two(1, 2), topk = two(1, 2), kthvalue = two(1, 2), mode = two(1, 2), histc = one(1),
  random = one(2), sequence = one(2), cross = one(1), xcorr3 = one(1), item = false, seed = false,
  -- nn
  threshold = one(1), threshold_backward = one(1), class_nll_forward = false, class_nll_backward = one(1),
  mse_loss = false, mse_grad = one(1), linear_forward = one(1), linear_grad_input = one(1),
  linear_acc_grad = two(1, 2), sigmoid_backward = one(1), tanh_backward = one(1),
  spatial_conv_forward = one(3), spatial_conv_grad_input = one(3), spatial_conv_acc_grad = two(3, 4),
  spatial_full_conv_forward = one(3), spatial_full_conv_grad_input = one(3),
  spatial_full_conv_acc_grad = two(3, 4),
  spatial_depthwise_conv = function(pass, m, _, a, b)
    bump(a); bump(b)
    if pass ~= 'forward' and pass ~= 'gradInput' and type(m) == 'table' then bump(m.gradWeight); bump(m.gradBias) end
  end,
  im2col = one(2), col2im = one(2),
  pool_max_forward = two(2, 3), pool_max_backward = one(2), pool_avg_forward = one(2),
  pool_avg_backward = one(2), adaptive_max_forward = two(1, 2), adaptive_max_backward = one(1),
  adaptive_avg_forward = one(1), adaptive_avg_backward = one(1), pool_max_indices_ok = false,
  batchnorm_forward = function(m, _, out) bump(out); bumpFields(m) end,
  batchnorm_backward = function(m, _, _, gi, gw, gb) bump(gi); bump(gw); bump(gb); bumpFields(m) end,
  temporal_conv_forward = one(1), temporal_conv_grad_input = one(1), temporal_conv_acc_grad = two(1, 2),
  nn_eltwise_forward = one(5), nn_eltwise_backward = one(5), nn_softmax_forward = one(2),
  nn_softmax_backward = one(2), nn_binary = one(2), nn_copy = one(1),
  log_softmax_rows_forward = two(1, 3), log_softmax_rows_backward = two(1, 4),
  class_target_check = false, cosine_embedding_forward = false, multi_margin_forward = false,
  -- whole-model plans
  plan_conv_supported = false, plan_conv_threads = false, plan_conv_compile = false,
  plan_conv_run = one(3), plan_train_compile = false, plan_train_steps = false,
  plan_train_forward = function(_, _, out, params) bump(out); bumpParams(params) end,
  plan_train_backward = function(_, _, gi, params) bump(gi); bumpParams(params) end,
  linear_forward_async = function(out) post(out) end,
  linear_acc_async = function(gw, gb) post(gw); post(gb) end,
  acc_pending = false, acc_async_ready = false,
  -- builders, helpers and settings (what they build runs inside other ops, or escapes: `ptr`)
  kernel = false, perType = false, each = false, slices = false, numel = false, isContiguous = false,
  sameSizes = false, nn_loop = false, mt19937 = false, set_threads = false, threads = false,
  cpus = false, threads_for = false, ufunc_loop = false, ufunc_unary = false, ufunc_binary = false,
  ufunc_reduce = false,
}
backend.writes = writes

-- A wrapper bumping the arguments at the given positions, compiled once per set of positions
-- (no loop on the op's path: a short loop entered on every call would get blacklisted).
local wrappers = {}
local function positionsWrapper(list)
  local key = table.concat(list, ',')
  local make = wrappers[key]
  if not make then
    local n, lines = 0, {}
    for _, p in ipairs(list) do n = math.max(n, p) end
    local names = {}
    for i = 1, n do names[i] = 'a' .. i end
    for _, p in ipairs(list) do lines[#lines + 1] = ('bump(a%d)'):format(p) end
    make = assert(loadstring(('local bump = ...; return function(fn) return function(...) local %s = ...; %s; return fn(...) end end')
      :format(table.concat(names, ', '), table.concat(lines, '; '))))(bump)
    wrappers[key] = make
  end
  return make
end
local allArgs = { 1, 2, 3, 4, 5, 6, 7, 8 }

local unwrapped = setmetatable({}, { __mode = 'k' })
local wrapOp
local function wrap(name, fn)
  local op = wrapOp(name, fn)
  if op ~= fn then unwrapped[op] = fn end
  return op
end
-- the op as registered, without its bumps (tests: a write path whose bump is gone must fail them)
function backend.unwrapped(op) return unwrapped[op] or op end

function wrapOp(name, fn)
  if type(fn) ~= 'function' then return fn end
  local w = writes[name]
  if w == false then return fn end
  if name == 'ptr' then   -- a raw pointer handed out: the memory may be written behind Lua's back
    local escape = versions.escape
    return function(t, ...) escape(t); return fn(t, ...) end
  end
  if name == 'acc_wait' then
    return function(...)
      local r = fn(...)
      for i = 1, nposted do bump(posted[i]); posted[i] = nil end
      nposted = 0
      return r
    end
  end
  if name == 'chain_compile' then   -- the chain's runs write their ops' outputs
    return function(prog, ...)
      local run = fn(prog, ...)
      if not run then return run end
      local outs = {}
      for _, op in ipairs(prog.ops or {}) do outs[#outs + 1] = op[2] end
      return function(T, ...)
        for i = 1, #outs do bump(T[outs[i]]) end
        return run(T, ...)
      end
    end
  end
  if type(w) == 'function' then return function(...) w(...); return fn(...) end end
  if w == nil then   -- every tensor and storage argument
    local first8 = positionsWrapper(allArgs)(fn)
    return function(...)
      local n = select('#', ...)
      if n > 8 then for i = 9, n do bump((select(i, ...))) end end
      return first8(...)
    end
  end
  return positionsWrapper(w)(fn)
end
backend.wrapWrites = wrap

-- Adds the ops of one family to a device's table; a name given twice is a mistake.
function backend.register(device, ops)
  local tbl = backend[device]
  for name, fn in pairs(ops) do
    assert(rawget(tbl, name) == nil, 'backend op registered twice: ' .. device .. '.' .. name)
    rawset(tbl, name, wrap(name, fn))
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
    rawset(tbl, name, wrap(name, op))
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
