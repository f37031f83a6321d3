-- oneDNN (the library PyTorch's own CPU convolutions run on) through the FFI: the C API of
-- dnnl.h (v3), found as the `onednn-cpu-gomp` wheel installs it (pip install 'luabridge[onednn]').
-- Its primitives run on the callers' memory where their layout is oneDNN's choice too, and
-- otherwise through reorders into buffers it owns (plans: one per shape and thread count).
-- Without the library, dnnl.available is false and callers keep their own kernels; so they do
-- while dnnl.enabled is false (tests compare both paths; LUABRIDGE_NO_DNNL=1 starts it false).
--
-- Threads: that build runs on GNU OpenMP. torch.getnumthreads() (less the CPUs busy with other
-- work) is given to omp_set_num_threads before each primitive is made or run (OpenMP's setting
-- is per calling thread), and, unless
-- the environment says otherwise, OpenMP's idle workers sleep at once (OMP_WAIT_POLICY=PASSIVE,
-- read when libgomp loads) instead of spinning against OpenBLAS and the Lua thread.
-- GOMP_SPINCOUNT=N set by the user makes them spin for N checks first (about 25 ns each on the
-- 2-core Xeon): the next pass within that time finds them awake (a 2-thread 256^3 matmul back
-- to back: 226 us asleep, 131 us at N = 10000; ResNet-18's training step at batch 8 on 2
-- threads, bench/conv_passes.lua alternating on the shared VM: 481-534 ms asleep against
-- 431-453 at N = 10000 in 4 pairs at load 5-7, but no gain in 3 pairs at load 8, and none for
-- VGG's or DCGAN's: not the default). Spinning workers' CPUs are then busy for OpenBLAS's
-- products until dnnl.teamSpinUntil (blas.threadsFor).
local ffi = require 'ffi'

local dnnl = { available = false, enabled = false }
-- How long OpenMP's idle workers spin after a pass (0: they sleep at once; set from the
-- environment when the library loads: GOMP_SPINCOUNT checks of about 25 ns, measured 0.25 ms
-- of CPU time after each pass at 10000), and the workers of the last multi-threaded pass,
-- spinning until teamSpinUntil (CLOCK_MONOTONIC seconds): blas.threadsFor gives OpenBLAS's
-- products no thread on their CPUs meanwhile.
dnnl.teamSpinSeconds, dnnl.teamSpinning, dnnl.teamSpinUntil = 0, 0, 0

ffi.cdef [[
typedef int dnnl_status_t;
typedef int64_t dnnl_dims_t[12];
typedef struct dnnl_engine *dnnl_engine_t;
typedef struct dnnl_stream *dnnl_stream_t;
typedef struct dnnl_memory_desc *dnnl_memory_desc_t;
typedef struct dnnl_memory *dnnl_memory_t;
typedef struct dnnl_primitive_desc *dnnl_primitive_desc_t;
typedef struct dnnl_primitive *dnnl_primitive_t;
typedef struct dnnl_primitive_attr *dnnl_primitive_attr_t;
typedef struct { int arg; dnnl_memory_t memory; } dnnl_exec_arg_t;
dnnl_status_t dnnl_engine_create(dnnl_engine_t *engine, int kind, size_t index);
dnnl_status_t dnnl_stream_create(dnnl_stream_t *stream, dnnl_engine_t engine, unsigned flags);
dnnl_status_t dnnl_stream_wait(dnnl_stream_t stream);
dnnl_status_t dnnl_memory_desc_create_with_strides(dnnl_memory_desc_t *md, int ndims,
  const dnnl_dims_t dims, int data_type, const dnnl_dims_t strides);
dnnl_status_t dnnl_memory_desc_create_with_tag(dnnl_memory_desc_t *md, int ndims,
  const dnnl_dims_t dims, int data_type, int tag);
dnnl_status_t dnnl_memory_desc_destroy(dnnl_memory_desc_t md);
int dnnl_memory_desc_equal(const dnnl_memory_desc_t a, const dnnl_memory_desc_t b);
dnnl_status_t dnnl_memory_create(dnnl_memory_t *memory, const dnnl_memory_desc_t md,
  dnnl_engine_t engine, void *handle);
dnnl_status_t dnnl_memory_set_data_handle(dnnl_memory_t memory, void *handle);
dnnl_status_t dnnl_memory_destroy(dnnl_memory_t memory);
const dnnl_memory_desc_t dnnl_primitive_desc_query_md(const dnnl_primitive_desc_t pd, int what, int index);
dnnl_status_t dnnl_primitive_desc_destroy(dnnl_primitive_desc_t pd);
dnnl_status_t dnnl_primitive_create(dnnl_primitive_t *primitive, const dnnl_primitive_desc_t pd);
dnnl_status_t dnnl_primitive_execute(const dnnl_primitive_t primitive, dnnl_stream_t stream,
  int nargs, const dnnl_exec_arg_t *args);
dnnl_status_t dnnl_primitive_destroy(dnnl_primitive_t primitive);
dnnl_status_t dnnl_reorder_primitive_desc_create(dnnl_primitive_desc_t *pd,
  const dnnl_memory_desc_t src, dnnl_engine_t src_engine, const dnnl_memory_desc_t dst,
  dnnl_engine_t dst_engine, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_convolution_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, int alg_kind, const dnnl_memory_desc_t src,
  const dnnl_memory_desc_t weights, const dnnl_memory_desc_t bias, const dnnl_memory_desc_t dst,
  const dnnl_dims_t strides, const dnnl_dims_t dilates, const dnnl_dims_t padding_l,
  const dnnl_dims_t padding_r, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_convolution_backward_data_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int alg_kind, const dnnl_memory_desc_t diff_src,
  const dnnl_memory_desc_t weights, const dnnl_memory_desc_t diff_dst, const dnnl_dims_t strides,
  const dnnl_dims_t dilates, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
  const dnnl_primitive_desc_t hint_fwd_pd, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_convolution_backward_weights_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int alg_kind, const dnnl_memory_desc_t src,
  const dnnl_memory_desc_t diff_weights, const dnnl_memory_desc_t diff_bias,
  const dnnl_memory_desc_t diff_dst, const dnnl_dims_t strides, const dnnl_dims_t dilates,
  const dnnl_dims_t padding_l, const dnnl_dims_t padding_r, const dnnl_primitive_desc_t hint_fwd_pd,
  const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_batch_normalization_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, const dnnl_memory_desc_t src, const dnnl_memory_desc_t dst,
  float epsilon, unsigned flags, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_batch_normalization_backward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, const dnnl_memory_desc_t diff_src,
  const dnnl_memory_desc_t diff_dst, const dnnl_memory_desc_t src, float epsilon, unsigned flags,
  const dnnl_primitive_desc_t hint_fwd_pd, const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_pooling_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, int alg_kind, const dnnl_memory_desc_t src,
  const dnnl_memory_desc_t dst, const dnnl_dims_t strides, const dnnl_dims_t kernel,
  const dnnl_dims_t dilation, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
  const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_matmul_primitive_desc_create(dnnl_primitive_desc_t *pd, dnnl_engine_t engine,
  const dnnl_memory_desc_t src, const dnnl_memory_desc_t weights, const dnnl_memory_desc_t bias,
  const dnnl_memory_desc_t dst, const dnnl_primitive_attr_t attr);
typedef struct dnnl_post_ops *dnnl_post_ops_t;
dnnl_status_t dnnl_post_ops_create(dnnl_post_ops_t *post_ops);
dnnl_status_t dnnl_post_ops_append_sum(dnnl_post_ops_t post_ops, float scale, int32_t zero_point, int data_type);
dnnl_status_t dnnl_post_ops_destroy(dnnl_post_ops_t post_ops);
dnnl_status_t dnnl_primitive_attr_create(dnnl_primitive_attr_t *attr);
dnnl_status_t dnnl_primitive_attr_set_post_ops(dnnl_primitive_attr_t attr, const dnnl_post_ops_t post_ops);
dnnl_status_t dnnl_primitive_attr_destroy(dnnl_primitive_attr_t attr);
size_t dnnl_memory_desc_get_size(const dnnl_memory_desc_t md);
int omp_get_max_threads(void);
void omp_set_num_threads(int n);
int setenv(const char *name, const char *value, int overwrite);
void *dlopen(const char *path, int flags);
]]

-- dnnl_types.h's values
dnnl.F32, dnnl.ANY = 3, 1                    -- data type f32, format tag any
dnnl.FORWARD_TRAINING, dnnl.CONVOLUTION_DIRECT, dnnl.POOLING_MAX = 64, 1, 0x1ff
dnnl.FORWARD_INFERENCE, dnnl.BACKWARD, dnnl.BACKWARD_DATA = 96, 128, 160
dnnl.USE_GLOBAL_STATS, dnnl.USE_SCALE, dnnl.USE_SHIFT = 1, 2, 4
dnnl.ARG = { SRC = 1, DST = 17, WEIGHTS = 33, BIAS = 41, MEAN = 49, VARIANCE = 50, SCALE = 51,
  SHIFT = 52, WORKSPACE = 64, DIFF_SRC = 129, DIFF_DST = 145, DIFF_WEIGHTS = 161, DIFF_BIAS = 169,
  DIFF_SCALE = 255, DIFF_SHIFT = 256 }
local QUERY_EXEC_ARG_MD = 255
local ARG_FROM, ARG_TO = 1, 17                 -- a reorder's source and destination
local ALLOCATE = ffi.cast('void *', -1)   -- DNNL_MEMORY_ALLOCATE: the library owns the buffer
dnnl.ARG_FROM, dnnl.ARG_TO, dnnl.ALLOCATE = ARG_FROM, ARG_TO, ALLOCATE

local lib, gomp, engine, stream

-- The library's path: $LUABRIDGE_DNNL, else lib/ under Python's prefix (where the wheel puts it).
local function candidates()
  local list = {}
  if os.getenv('LUABRIDGE_DNNL') then list[1] = os.getenv('LUABRIDGE_DNNL') end
  local python = rawget(_G, 'python')
  local ok, prefix = pcall(function() return python.eval('__import__("sys").prefix') end)
  if ok and type(prefix) == 'string' then list[#list + 1] = prefix .. '/lib/libdnnl.so.3' end
  list[#list + 1] = 'libdnnl.so.3'
  return list
end

local function check(status, what)
  if status ~= 0 then error(('oneDNN: %s failed (status %d)'):format(what, status), 2) end
end
dnnl.check = check

local function load()
  if not os.getenv('OMP_WAIT_POLICY') and not os.getenv('GOMP_SPINCOUNT') then
    ffi.C.setenv('OMP_WAIT_POLICY', 'PASSIVE', 0)
  end
  local policy, count = (os.getenv('OMP_WAIT_POLICY') or ''):upper(), tonumber(os.getenv('GOMP_SPINCOUNT') or '')
  if count then   -- libgomp's GOMP_SPINCOUNT overrides the policy ('infinite': for ever)
    dnnl.teamSpinSeconds = math.min(count * 2.5e-8, 1e9)
  elseif os.getenv('GOMP_SPINCOUNT') then
    dnnl.teamSpinSeconds = 1e9
  elseif policy == 'ACTIVE' then
    dnnl.teamSpinSeconds = 1e9
  elseif policy ~= 'PASSIVE' then
    dnnl.teamSpinSeconds = 3e5 * 2.5e-8   -- libgomp's default count
  end
  local path
  for _, p in ipairs(candidates()) do
    local ok, l = pcall(ffi.load, p)
    if ok then lib, path = l, p; break end
  end
  if not lib then return end
  local ok = pcall(function() gomp = ffi.load('libgomp.so.1'); return gomp.omp_get_max_threads end)
  if not ok then lib = nil; return end
  -- Never unloaded (RTLD_NOLOAD | RTLD_NODELETE | RTLD_LAZY): OpenMP's idle workers live in
  -- libgomp, and a runtime closing (which unloads its FFI libraries) must not pull the code
  -- from under them.
  ffi.C.dlopen(path, 0x1005)
  ffi.C.dlopen('libgomp.so.1', 0x1005)
  local e, s = ffi.new('dnnl_engine_t[1]'), ffi.new('dnnl_stream_t[1]')
  check(lib.dnnl_engine_create(e, 1, 0), 'engine_create')
  check(lib.dnnl_stream_create(s, e[0], 1), 'stream_create')
  engine, stream = e[0], s[0]
  -- the library, engine and stream, for the files declaring more of its API (dnnl_plan.lua)
  dnnl.lib, dnnl.engine, dnnl.stream = lib, engine, stream
  dnnl.available, dnnl.enabled = true, not os.getenv('LUABRIDGE_NO_DNNL')
end
load()

-- OpenMP's thread count for the next primitive (dnnl_nn.lua's convdnnl.threads picks it by the
-- BLAS calls' rule; blas.lua calls this module, never the other way round).
function dnnl.setThreads(n)
  gomp.omp_set_num_threads(n)
end

function dnnl.dims(list)
  local d = ffi.new('dnnl_dims_t')
  for i, v in ipairs(list) do d[i - 1] = v end
  return d
end

-- A memory descriptor: of the plain (row-major contiguous) layout of sizes, or with tag `any`,
-- or with the given element strides.
function dnnl.md(sizes, any, strides)
  local md = ffi.new('dnnl_memory_desc_t[1]')
  if any then
    check(lib.dnnl_memory_desc_create_with_tag(md, #sizes, dnnl.dims(sizes), dnnl.F32, dnnl.ANY), 'memory_desc_create')
  else
    local s = 1
    if not strides then
      strides = {}
      for i = #sizes, 1, -1 do strides[i] = s; s = s * sizes[i] end
    end
    check(lib.dnnl_memory_desc_create_with_strides(md, #sizes, dnnl.dims(sizes), dnnl.F32,
      dnnl.dims(strides)), 'memory_desc_create')
  end
  return ffi.gc(md[0], lib.dnnl_memory_desc_destroy)
end

local function memory(md, handle)
  local m = ffi.new('dnnl_memory_t[1]')
  check(lib.dnnl_memory_create(m, md, engine, handle), 'memory_create')
  return ffi.gc(m[0], lib.dnnl_memory_destroy)
end

local function primitive(pd, what)
  local p = ffi.new('dnnl_primitive_t[1]')
  check(lib.dnnl_primitive_create(p, pd), what)
  return ffi.gc(p[0], lib.dnnl_primitive_destroy)
end
-- For files that declare more of oneDNN's API (nn_plan.lua): a memory object on the engine
-- (handle: the caller's buffer, nil, or ALLOCATE), a primitive of pd, and the layout pd wants
-- for argument arg; each released with its last reference.
dnnl.memory, dnnl.primitive = memory, primitive
function dnnl.queryMd(pd, arg) return lib.dnnl_primitive_desc_query_md(pd, QUERY_EXEC_ARG_MD, arg) end

-- A primitive descriptor from create(pd_out, engine, ...), destroyed with its last reference.
function dnnl.pd(create, what, ...)
  local pd = ffi.new('dnnl_primitive_desc_t[1]')
  local status = lib[create](pd, engine, ...)
  if status ~= 0 then return nil, ('%s (status %d)'):format(what, status) end
  return ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
end

local function reorder(from, to)
  local pd = ffi.new('dnnl_primitive_desc_t[1]')
  check(lib.dnnl_reorder_primitive_desc_create(pd, from, engine, to, engine, nil), 'reorder')
  local p = primitive(pd[0], 'reorder')
  lib.dnnl_primitive_desc_destroy(pd[0])
  return p
end

local function step(prim, n)
  return { prim = prim, n = n, args = ffi.new('dnnl_exec_arg_t[?]', n) }
end

-- A plan runs the primitive of pd on plain row-major buffers. specs[i] = { arg, sizes, out }:
-- the argument's id, its sizes (nil: the caller's buffer takes pd's own layout, of
-- plan.bytes[i] bytes), and whether the primitive writes it. Where pd's layout is not the
-- plain one, the plan holds a buffer in pd's layout and reorders into it (inputs) or out of it
-- (outputs).
function dnnl.plan(pd, specs)
  local plan = { main = step(primitive(pd, 'primitive_create'), #specs), before = {}, after = {},
    user = {}, keep = {}, bytes = {} }
  for i, s in ipairs(specs) do
    local want = lib.dnnl_primitive_desc_query_md(pd, QUERY_EXEC_ARG_MD, s.arg)
    plan.bytes[i] = tonumber(lib.dnnl_memory_desc_get_size(want))
    local user = s.sizes and dnnl.md(s.sizes) or want
    local umem = memory(user, nil)
    plan.user[i], plan.keep[#plan.keep + 1] = umem, user
    local mem = umem
    if lib.dnnl_memory_desc_equal(want, user) == 0 then
      mem = memory(want, ALLOCATE)
      local r = s.out and step(reorder(want, user), 2) or step(reorder(user, want), 2)
      r.args[0].arg, r.args[0].memory = ARG_FROM, s.out and mem or umem
      r.args[1].arg, r.args[1].memory = ARG_TO, s.out and umem or mem
      local list = s.out and plan.after or plan.before
      list[#list + 1], plan.keep[#plan.keep + 1] = r, mem
    end
    plan.main.args[i - 1].arg, plan.main.args[i - 1].memory = s.arg, mem
  end
  return plan
end

-- OpenMP makes its workers when a team first grows: made with SIGINT blocked (signals.lua).
local teamMade = 1
local blockCtrlC = require('torch.backend.cpu.signals').blockCtrlC

-- GNU OpenMP is not fork-safe: in a child forked after its team grew, a primitive made for 2+
-- threads waits for workers the child does not have (for ever). There every thread count asked
-- of blas.threadsFor is 1 (new plans, made for one thread, run without the team), and a plan
-- made for more raises an error rather than hang.
pcall(ffi.cdef, 'int luabridge_dnnl_getpid(void) __asm__("getpid");')
local teamPid = nil
function dnnl.forkedChild()
  return teamPid ~= nil and ffi.C.luabridge_dnnl_getpid() ~= teamPid
end

local function execute(s)
  check(lib.dnnl_primitive_execute(s.prim, stream, s.n, s.args), 'primitive_execute')
end

-- Runs a plan on the buffers ... (pointers, in the order of its specs), on the thread count
-- its primitives were made for (plan.threads, set by the caller that keys its plans by it:
-- a primitive may size per-thread buffers for that count).
local function executeAll(plan)
  for _, r in ipairs(plan.before) do execute(r) end
  execute(plan.main)
  for _, r in ipairs(plan.after) do execute(r) end
  lib.dnnl_stream_wait(stream)
end

pcall(ffi.cdef, [[typedef struct { long s; long ns; } luabridge_dnnl_timespec;
int luabridge_dnnl_clock_gettime(int clock, luabridge_dnnl_timespec *ts) __asm__("clock_gettime");]])
local ts = ffi.new('luabridge_dnnl_timespec')
local function now()
  ffi.C.luabridge_dnnl_clock_gettime(1, ts)
  return tonumber(ts.s) + tonumber(ts.ns) * 1e-9
end
dnnl.now = now

function dnnl.run(plan, ...)
  if plan.threads > 1 and dnnl.forkedChild() then
    error(('oneDNN: a pass made for %d threads in a process forked after OpenMP started its threads '
      .. '(GNU OpenMP is not fork-safe): this process runs oneDNN on one thread'):format(plan.threads), 2)
  end
  local user = plan.user
  for i = 1, select('#', ...) do lib.dnnl_memory_set_data_handle(user[i], (select(i, ...))) end
  gomp.omp_set_num_threads(plan.threads)
  if plan.threads > 1 and dnnl.teamSpinSeconds > 0 then
    dnnl.teamSpinning, dnnl.teamSpinUntil = plan.threads - 1, now() + dnnl.teamSpinSeconds
  end
  local unblock = plan.threads > teamMade and blockCtrlC()
  if not unblock then
    executeAll(plan)
    if plan.threads > 1 and dnnl.teamSpinSeconds > 0 then dnnl.teamSpinUntil = now() + dnnl.teamSpinSeconds end
    return
  end
  -- the team grows here: the mask comes back even when a primitive fails (SIGINT stayed blocked)
  local ok, err = pcall(executeAll, plan)
  unblock()
  if not ok then error(err, 0) end
  if plan.threads > 1 and dnnl.teamSpinSeconds > 0 then dnnl.teamSpinUntil = now() + dnnl.teamSpinSeconds end
  teamMade = plan.threads
  teamPid = teamPid or ffi.C.luabridge_dnnl_getpid()
end

-- Float32 GEMM as BLAS's (column-major, alpha 1): C = op(A) op(B) + beta C, on a matmul
-- primitive made once per shape, leading dimensions, beta and thread count. oneDNN's matmul is
-- row-major, so it computes C^T = op(B)^T op(A)^T over the same memory: each operand is a
-- strided view, nothing is copied. beta ~= 0 is a sum post-op (dst = product + beta * dst).
local gemmPlans, gemmCount, MAX_GEMM_PLANS = {}, 0, 256

local function gemmPlan(ta, tb, m, n, k, lda, ldb, beta, ldc, threads)
  local attr = ffi.new('dnnl_primitive_attr_t[1]')
  check(lib.dnnl_primitive_attr_create(attr), 'primitive_attr_create')
  attr = ffi.gc(attr[0], lib.dnnl_primitive_attr_destroy)
  if beta ~= 0 then
    local ops = ffi.new('dnnl_post_ops_t[1]')
    check(lib.dnnl_post_ops_create(ops), 'post_ops_create')
    ops = ffi.gc(ops[0], lib.dnnl_post_ops_destroy)
    check(lib.dnnl_post_ops_append_sum(ops, beta, 0, dnnl.F32), 'post_ops_append_sum')
    check(lib.dnnl_primitive_attr_set_post_ops(attr, ops), 'primitive_attr_set_post_ops')
  end
  local src = dnnl.md({ n, k }, false, tb and { 1, ldb } or { ldb, 1 })       -- op(B)^T
  local weights = dnnl.md({ k, m }, false, ta and { 1, lda } or { lda, 1 })   -- op(A)^T
  local dst = dnnl.md({ n, m }, false, { ldc, 1 })                            -- C^T
  gomp.omp_set_num_threads(threads)
  local pd = dnnl.pd('dnnl_matmul_primitive_desc_create', 'matmul', src, weights, nil, dst, attr)
  if not pd then return false end
  local plan = { main = step(primitive(pd, 'primitive_create'), 3), before = {}, after = {},
    user = { memory(src, nil), memory(weights, nil), memory(dst, nil) }, keep = { src, weights, dst },
    threads = threads }
  for i, arg in ipairs { dnnl.ARG.SRC, dnnl.ARG.WEIGHTS, dnnl.ARG.DST } do
    plan.main.args[i - 1].arg, plan.main.args[i - 1].memory = arg, plan.user[i]
  end
  return plan
end

-- Runs the product on `threads` threads and returns true, or returns false where oneDNN
-- declines the shape (the caller then runs its BLAS).
function dnnl.sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, threads)
  local key = (ta and 't' or 'n') .. (tb and 't' or 'n') .. m .. ' ' .. n .. ' ' .. k .. ' ' .. lda
    .. ' ' .. ldb .. ' ' .. ldc .. ' ' .. beta .. ' ' .. threads
  local plan = gemmPlans[key]
  if plan == nil then
    if gemmCount >= MAX_GEMM_PLANS then gemmPlans, gemmCount = {}, 0 end
    plan = gemmPlan(ta, tb, m, n, k, lda, ldb, beta, ldc, threads)
    gemmPlans[key], gemmCount = plan, gemmCount + 1
  end
  if not plan then return false end
  dnnl.run(plan, b, a, c)
  return true
end

return dnnl
