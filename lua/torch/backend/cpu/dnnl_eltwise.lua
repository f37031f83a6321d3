-- oneDNN's elementwise, softmax and binary primitives (torch.backend.cpu.dnnl) on the callers'
-- contiguous Float memory, for nn's activation modules, SoftMax / LogSoftMax / SpatialSoftMax
-- and CAddTable / CMulTable (backend/cpu/nn_pointwise.lua picks when): a primitive runs on
-- all the threads torch.setnumthreads allows, where the caller's own loops run on one.
--
-- A plan (the primitive and its memory objects, run on the caller's pointers) is made once per
-- kind, size and thread count; at most MAX_PLANS are kept (all are dropped at the next one).
local ffi = require 'ffi'
local dnnl = require 'torch.backend.cpu.dnnl'
local blas = require 'torch.backend.cpu.blas'

local eltwise = {}
local ARG = dnnl.ARG
local MAX_PLANS = 256   -- no buffers of their own: a few hundred bytes each

ffi.cdef [[
dnnl_status_t dnnl_eltwise_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, int alg_kind, const dnnl_memory_desc_t src,
  const dnnl_memory_desc_t dst, float alpha, float beta, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_eltwise_backward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int alg_kind, const dnnl_memory_desc_t diff_src,
  const dnnl_memory_desc_t diff_dst, const dnnl_memory_desc_t data, float alpha, float beta,
  const dnnl_primitive_desc_t hint_fwd_pd, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_softmax_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, int alg_kind, const dnnl_memory_desc_t src,
  const dnnl_memory_desc_t dst, int axis, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_softmax_backward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int alg_kind, const dnnl_memory_desc_t diff_src,
  const dnnl_memory_desc_t diff_dst, const dnnl_memory_desc_t dst, int axis,
  const dnnl_primitive_desc_t hint_fwd_pd, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_binary_primitive_desc_create(dnnl_primitive_desc_t *pd, dnnl_engine_t engine,
  int alg_kind, const dnnl_memory_desc_t src0, const dnnl_memory_desc_t src1,
  const dnnl_memory_desc_t dst, const dnnl_primitive_attr_t attr);
]]

-- dnnl_types.h's (v3.2) algorithm kinds. A name ending in _dst: the backward pass reads the
-- forward's output (dst) rather than its input.
eltwise.ALG = {
  relu = 0x20, tanh = 0x21, elu = 0x22, square = 0x23, abs = 0x24, sqrt = 0x25, linear = 0x26,
  soft_relu = 0x27, logistic = 0x29, exp = 0x2a, log = 0x2d, clip_v2 = 0x2f,
  relu_dst = 0x100, tanh_dst = 0x101, elu_dst = 0x102, sqrt_dst = 0x103, logistic_dst = 0x104,
  exp_dst = 0x105, clip_v2_dst = 0x106,
}
local SOFTMAX = { soft = 0x30000, log = 0x30001 }
local BINARY = { add = 0x1fff0, mul = 0x1fff1 }
local ARG_SRC_1 = 2

local plans, count = {}, 0
eltwise.runs = 0   -- passes run on oneDNN (tests)

-- The plan keyed by (kind, a, b, c, d, threads), made by makers[kind](a, b, c, d) on `threads`
-- threads the first time (false: oneDNN refused it). Nested tables, not a key string: nothing
-- is made per call.
local makers = {}
local function planFor(kind, a, b, c, d, threads)
  -- a NaN parameter (nn.ELU(0/0)) is no table key: the module's own pass gives its NaNs
  if a ~= a or b ~= b or c ~= c or d ~= d then return false end
  local t = plans[kind]
  if not t then t = {}; plans[kind] = t end
  local t1 = t[a]; if not t1 then t1 = {}; t[a] = t1 end
  local t2 = t1[b]; if not t2 then t2 = {}; t1[b] = t2 end
  local t3 = t2[c]; if not t3 then t3 = {}; t2[c] = t3 end
  local t4 = t3[d]; if not t4 then t4 = {}; t3[d] = t4 end
  local p = t4[threads]
  if p == nil then
    if count >= MAX_PLANS then
      plans, count = {}, 0
      return planFor(kind, a, b, c, d, threads)
    end
    dnnl.setThreads(threads)
    p = makers[kind](a, b, c, d) or false
    if p then p.threads = threads end
    t4[threads], count = p, count + 1
  end
  return p
end

local function eltwiseForwardPd(alg, md, alpha, beta)
  return dnnl.pd('dnnl_eltwise_forward_primitive_desc_create', 'eltwise forward',
    dnnl.FORWARD_TRAINING, eltwise.ALG[alg], md, md, alpha, beta, nil)
end

-- dst = f(src) over n elements
function makers.ef(alg, alpha, beta, n)
  local pd = eltwiseForwardPd(alg, dnnl.md { n }, alpha, beta)
  return pd and dnnl.plan(pd, { { arg = ARG.SRC, sizes = { n } }, { arg = ARG.DST, sizes = { n }, out = true } })
end

-- diffSrc = f'(data) diffDst over n elements (data: src, or dst for the _dst kinds)
function makers.eb(alg, alpha, beta, n)
  local md = dnnl.md { n }
  local hint = eltwiseForwardPd(alg, md, alpha, beta)
  local pd = hint and dnnl.pd('dnnl_eltwise_backward_primitive_desc_create', 'eltwise backward',
    eltwise.ALG[alg], md, md, md, alpha, beta, hint, nil)
  local data = alg:find('_dst$') and ARG.DST or ARG.SRC
  return pd and dnnl.plan(pd, { { arg = data, sizes = { n } }, { arg = ARG.DIFF_DST, sizes = { n } },
    { arg = ARG.DIFF_SRC, sizes = { n }, out = true } })
end

-- The plain sizes a x b x c (a 0: no such dim, c 0 too) and the axis of b (0-based)
local function softmaxShape(a, b, c)
  local dims = a > 0 and { a, b } or { b }
  local axis = #dims - 1
  if c > 0 then dims[#dims + 1] = c end
  return dims, axis
end

local function softmaxForwardPd(kind, md, axis)
  return dnnl.pd('dnnl_softmax_forward_primitive_desc_create', 'softmax forward',
    dnnl.FORWARD_TRAINING, SOFTMAX[kind], md, md, axis, nil)
end

function makers.sf(kind, a, b, c)
  local dims, axis = softmaxShape(a, b, c)
  local pd = softmaxForwardPd(kind, dnnl.md(dims), axis)
  return pd and dnnl.plan(pd, { { arg = ARG.SRC, sizes = dims }, { arg = ARG.DST, sizes = dims, out = true } })
end

function makers.sb(kind, a, b, c)
  local dims, axis = softmaxShape(a, b, c)
  local md = dnnl.md(dims)
  local hint = softmaxForwardPd(kind, md, axis)
  local pd = hint and dnnl.pd('dnnl_softmax_backward_primitive_desc_create', 'softmax backward',
    SOFTMAX[kind], md, md, md, axis, hint, nil)
  return pd and dnnl.plan(pd, { { arg = ARG.DST, sizes = dims }, { arg = ARG.DIFF_DST, sizes = dims },
    { arg = ARG.DIFF_SRC, sizes = dims, out = true } })
end

function makers.bin(kind, n)
  local md = dnnl.md { n }
  local pd = dnnl.pd('dnnl_binary_primitive_desc_create', 'binary', BINARY[kind], md, md, md, nil)
  return pd and dnnl.plan(pd, { { arg = ARG.SRC, sizes = { n } }, { arg = ARG_SRC_1, sizes = { n } },
    { arg = ARG.DST, sizes = { n }, out = true } })
end

-- Runs the plan of (kind, a, b, c, d, threads) on the pointers ... (in its specs' order);
-- false where oneDNN refused it.
local function runPlan(kind, a, b, c, d, threads, ...)
  local p = planFor(kind, a, b, c, d, threads)
  if not p then return false end
  dnnl.run(p, ...)
  eltwise.runs = eltwise.runs + 1
  return true
end

-- dst = f(src) over n elements (alg: a key of eltwise.ALG; alpha, beta its parameters); false
-- where oneDNN refuses it.
function eltwise.forward(alg, alpha, beta, n, threads, dst, src)
  return runPlan('ef', alg, alpha, beta, n, threads, src, dst)
end

-- diffSrc = f'(data) diffDst over n elements, data the forward's input (its output for the
-- _dst kinds). diffSrc may be diffDst.
function eltwise.backward(alg, alpha, beta, n, threads, diffSrc, diffDst, data)
  return runPlan('eb', alg, alpha, beta, n, threads, data, diffDst, diffSrc)
end

-- Softmax ('soft') or log-softmax ('log') of the plain a x b x c block along b (a = 0 or
-- c = 0: no such dim).
function eltwise.softmaxForward(kind, a, b, c, threads, dst, src)
  return runPlan('sf', kind, a, b, c, threads, src, dst)
end

-- Its gradient from the forward's output dst and diffDst (diffSrc may be diffDst).
function eltwise.softmaxBackward(kind, a, b, c, threads, diffSrc, diffDst, dst)
  return runPlan('sb', kind, a, b, c, threads, dst, diffDst, diffSrc)
end

-- dst = x + y or x * y (kind 'add' or 'mul') over n elements; dst may be x.
function eltwise.binary(kind, n, threads, dst, x, y)
  return runPlan('bin', kind, n, 0, 0, threads, x, y, dst)
end

-- When oneDNN runs a pass, by group and name ('ef' / 'eb': the forward and backward passes of
-- an nn module, by its class name less 'nn.'; 'sf' / 'sb': softmax's, 'soft' and 'log'; 'bin':
-- 'add', 'mul', 'copy'): `one`, the element count from which oneDNN on one thread beats the
-- module's own pass (never: numpy's SIMD loop is as fast), and `least`, the elements per thread
-- from which a second thread pays against the faster one-thread path. Measured by
-- bench/eltwise_threads.py (docs/performance.md has the numbers); a pass not listed stays.
local DEFAULT = { one = math.huge, least = math.huge }
local never = math.huge
-- least: a second thread's share must pay for waking the team (it sleeps between calls) on a
-- CPU where another pool may be running or spinning: 1M elements per thread for the passes near
-- memory speed, 512K for those costing twice that. (64K and 32K, from the ~4 µs a start costs
-- alone, made an MLP step at batch 256, whose ReLUs have 131K elements, 2.5x slower on 2
-- threads than on 1: bench/real_models.py.)
local CHEAP, DEAR = 1048576, 524288
local function limit(one, least) return { one = one, least = least or CHEAP } end
eltwise.limits = {
  ef = { Threshold = limit(16384), LeakyReLU = limit(1024), ELU = limit(512, DEAR), Tanh = limit(never),
    Sigmoid = limit(512, DEAR), Abs = limit(never), Square = limit(1024), Sqrt = limit(512, DEAR),
    HardTanh = limit(1024) },
  eb = { Threshold = limit(4096), LeakyReLU = limit(1024), ELU = limit(512), Tanh = limit(2048),
    Sigmoid = limit(2048), SoftPlus = limit(512, DEAR), Abs = limit(512), Square = limit(2048),
    Exp = limit(4096), Log = limit(2048), HardTanh = limit(512) },
  sf = { soft = limit(128, DEAR) },
  sb = { soft = limit(128, DEAR), log = limit(512, DEAR) },
  bin = { add = limit(512), mul = limit(512), copy = limit(8192) },
}

-- Tests and benches: a thread count that every pass runs on whatever its size (nil: the
-- limits decide); and the switch of these passes alone (dnnl.enabled switches all of oneDNN;
-- LUABRIDGE_NO_DNNL_ELTWISE=1 starts this one false).
eltwise.forceThreads = nil
eltwise.enabled = not os.getenv('LUABRIDGE_NO_DNNL_ELTWISE')

-- The thread count oneDNN runs a pass on for n elements, or nil where the caller's loop runs
-- it (oneDNN absent or switched off, or n below the pass's limits).
function eltwise.threads(group, name, n)
  if not (dnnl.available and dnnl.enabled and eltwise.enabled) or n == 0 then return nil end
  if eltwise.forceThreads then return eltwise.forceThreads end
  local limit = eltwise.limits[group][name] or DEFAULT
  if n < limit.one and n < 2 * limit.least then return nil end
  local threads = blas.threadsFor(n, limit.least, true)
  if threads == 1 and n < limit.one then return nil end
  return threads
end

-- How many plans are kept (tests).
function eltwise.planCount() return count end

return eltwise
