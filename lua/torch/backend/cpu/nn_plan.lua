-- The CPU ops of whole-model plans (lua/nn/util/plan_conv.lua plans; the CUDA file lacks them):
-- a run of convolutions (each with its batch normalization in evaluation as per-channel
-- multiply and add post-ops, a residual add as a binary add post-op and ReLU as an eltwise post-op)
-- and max poolings compiled into oneDNN primitives over activations kept in the blocked
-- layouts oneDNN picks: the run's input is read as it is (plain NCHW), its output reordered
-- once into the caller's plain tensor, and nothing in between leaves oneDNN's layouts.
--
-- plan_conv_compile(program) makes the primitives for one thread count (nil, reason when
-- oneDNN refuses a step); plan_conv_run(exe, input, output, params) runs them on the current
-- weights and statistics (read at each run: an optimizer's step is seen by the next run).
--
-- The program (values are ids; value 0 is the input):
--   { input = {B, C, H, W}, output = id, values = { [id] = {B, C, H, W} },
--     steps = { { kind = 'conv', src, dst, kH, kW, dH, dW, padH, padW, bias (bool),
--                 bn (bool), relu (bool), sum (id or nil) },
--               { kind = 'maxpool', src, dst, kH, kW, dH, dW, padH, padW } } }
-- params[i] for conv step i: { weight = tensor, bias = tensor or nil, bn = { mean, var, weight,
-- bias (tensors or nil), eps } or nil }.
local ffi = require 'ffi'
local backend = require 'torch.backend'
local dnnl = require 'torch.backend.cpu.dnnl'
local convdnnl = require 'torch.backend.cpu.dnnl_nn'
local apply = require 'torch.backend.cpu.apply'

local ptr = apply.ptr

-- oneDNN v3.2's post-op API (dnnl.h); declared one by one so that a declaration another file
-- makes first is kept
for _, decl in ipairs {
  'dnnl_status_t dnnl_post_ops_append_eltwise(dnnl_post_ops_t post_ops, int alg_kind, float alpha, float beta);',
  'dnnl_status_t dnnl_post_ops_append_binary(dnnl_post_ops_t post_ops, int alg_kind, const dnnl_memory_desc_t src1_desc);',
  'dnnl_status_t dnnl_primitive_desc_query(const dnnl_primitive_desc_t pd, int what, int index, void *result);',
} do pcall(ffi.cdef, decl) end
local QUERY_IMPL_INFO = 8   -- dnnl_query_impl_info_str

local RELU, BINARY_ADD, BINARY_MUL = 0x20, 0x1fff0, 0x1fff1
local ARG_SRC_1, POST_OP_BASE = 2, 32768
local ARG_FROM, ARG_TO, ALLOCATE = dnnl.ARG_FROM, dnnl.ARG_TO, dnnl.ALLOCATE
local ARG = dnnl.ARG
local check, primitive, queryMd = dnnl.check, dnnl.primitive, dnnl.queryMd

local function lib() return dnnl.lib end

-- the list holding the memory objects of the exe being compiled (steps refer to them by pointer)
local holding

local function memory(md, handle)
  local m = dnnl.memory(md, handle)
  holding[#holding + 1] = m
  return m
end

-- a step as dnnl.run executes it: the primitive and its (arg, memory) pairs
local function step(prim, args)
  local s = { prim = prim, n = #args, args = ffi.new('dnnl_exec_arg_t[?]', #args) }
  for i, a in ipairs(args) do s.args[i - 1].arg, s.args[i - 1].memory = a[1], a[2] end
  return s
end

-- the name of the implementation oneDNN picked for pd (for profiles)
local function implName(pd)
  local out = ffi.new('const char *[1]')
  if lib().dnnl_primitive_desc_query(pd, QUERY_IMPL_INFO, 0, out) ~= 0 or out[0] == nil then return '?' end
  return ffi.string(out[0])
end

local function reorderStep(fromMd, fromMem, toMd, toMem)
  local pd = ffi.new('dnnl_primitive_desc_t[1]')
  check(lib().dnnl_reorder_primitive_desc_create(pd, fromMd, dnnl.engine, toMd, dnnl.engine, nil), 'reorder')
  local p = primitive(pd[0], 'reorder')
  local s = step(p, { { ARG_FROM, fromMem }, { ARG_TO, toMem } })
  s.name = 'reorder ' .. implName(pd[0])
  lib().dnnl_primitive_desc_destroy(pd[0])
  return s
end

-- The attributes of a convolution: [x scale, + shift (per channel)] [+ sum (a value like dst)]
-- [relu].
local function postOps(C, bn, sum, relu)
  local attr = ffi.new('dnnl_primitive_attr_t[1]')
  check(lib().dnnl_primitive_attr_create(attr), 'primitive_attr_create')
  attr = ffi.gc(attr[0], lib().dnnl_primitive_attr_destroy)
  local ops = ffi.new('dnnl_post_ops_t[1]')
  check(lib().dnnl_post_ops_create(ops), 'post_ops_create')
  ops = ffi.gc(ops[0], lib().dnnl_post_ops_destroy)
  local channel
  if bn then
    channel = dnnl.md({ 1, C, 1, 1 })
    check(lib().dnnl_post_ops_append_binary(ops, BINARY_MUL, channel), 'post_ops_append_binary')
    check(lib().dnnl_post_ops_append_binary(ops, BINARY_ADD, channel), 'post_ops_append_binary')
  end
  -- the residual's add: a binary post-op reading the shortcut (oneDNN v3.2 runs a sum post-op
  -- after binary ones only in its reference convolution, some 20 times slower)
  if sum then check(lib().dnnl_post_ops_append_binary(ops, BINARY_ADD, sum), 'post_ops_append_binary') end
  if relu then check(lib().dnnl_post_ops_append_eltwise(ops, RELU, 0, 0), 'post_ops_append_eltwise') end
  check(lib().dnnl_primitive_attr_set_post_ops(attr, ops), 'primitive_attr_set_post_ops')
  return attr, channel
end

-- Buffers of the activations, reused once a value is dead: float tensors, kept by the exe.
local function allocator(exe)
  local free = {}
  local a = {}
  function a.take(bytes)
    local best
    for i, b in ipairs(free) do
      if b.bytes >= bytes and (not best or b.bytes < free[best].bytes) then best = i end
    end
    if best then return table.remove(free, best) end
    local t = torch.FloatTensor(math.ceil(bytes / 4))
    exe.keep[#exe.keep + 1] = t
    return { bytes = bytes, t = t, p = ptr(t) }
  end
  function a.give(b) free[#free + 1] = b end
  return a
end

local function compile(program)
  local exe = { before = {}, after = {}, user = {}, keep = {}, convs = {} }
  holding = exe.keep
  local steps = {}
  local values = {}   -- id -> { md, mem, buf }
  local lastUse = {}
  for i, s in ipairs(program.steps) do
    lastUse[s.src] = i
    if s.sum then lastUse[s.sum] = i end
  end
  lastUse[program.output] = #program.steps + 1
  local alloc = allocator(exe)
  local function keep(x) exe.keep[#exe.keep + 1] = x; return x end

  -- the input, read where it lies (its handle is set per run)
  local inMd = keep(dnnl.md(program.input))
  local inMem = memory(inMd, nil)
  exe.user[1] = inMem
  values[0] = { md = inMd, mem = inMem }
  local outMd = keep(dnnl.md(program.values[program.output]))
  local outMem = memory(outMd, nil)
  exe.user[2] = outMem

  local function newValue(id, md)
    local bytes = tonumber(lib().dnnl_memory_desc_get_size(md))
    local buf = alloc.take(bytes)
    values[id] = { md = md, mem = memory(md, buf.p), buf = buf }
  end
  local function release(id, i)
    local v = values[id]
    if v and v.buf and lastUse[id] == i then alloc.give(v.buf); v.buf = nil end
  end

  for i, s in ipairs(program.steps) do
    local src, size = values[s.src], program.values[s.dst]
    local B, C = program.values[s.src][1], program.values[s.src][2]
    local H, W = program.values[s.src][3], program.values[s.src][4]
    local O, oH, oW = size[2], size[3], size[4]
    local padB = (oH - 1) * s.dH + s.kH - H - s.padH
    local padR = (oW - 1) * s.dW + s.kW - W - s.padW
    if s.kind == 'conv' then
      local attr, channel = postOps(O, s.bn, s.sum and values[s.sum].md, s.relu)
      keep(attr)
      local sum = s.sum and values[s.sum]
      local dstMd = sum and sum.md or keep(dnnl.md(size, true))
      local wSizes = { O, C, s.kH, s.kW }
      local pd, why = dnnl.pd('dnnl_convolution_forward_primitive_desc_create', 'convolution forward',
        dnnl.FORWARD_INFERENCE, dnnl.CONVOLUTION_DIRECT, keep(dnnl.md(program.values[s.src], true)),
        keep(dnnl.md(wSizes, true)),
        s.bias and keep(dnnl.md({ O })) or nil, dstMd, dnnl.dims { s.dH, s.dW }, dnnl.dims { 0, 0 },
        dnnl.dims { s.padH, s.padW }, dnnl.dims { padB, padR }, attr)
      if not pd then return nil, why end
      keep(pd)
      local conv = { O = O }
      exe.convs[#exe.convs + 1] = conv
      -- the weights: reordered from the caller's plain tensor at each run
      local userW = keep(dnnl.md(wSizes))
      local wMem = memory(userW, nil)
      exe.user[#exe.user + 1] = wMem
      conv.weightIndex = #exe.user
      local wantW = queryMd(pd, ARG.WEIGHTS)
      if lib().dnnl_memory_desc_equal(wantW, userW) == 0 then
        local blocked = memory(wantW, ALLOCATE)
        keep(blocked)
        steps[#steps + 1] = reorderStep(userW, wMem, wantW, blocked)
        wMem = blocked
      end
      -- the source in the layout this convolution wants (oneDNN's im2col path, which it takes on
      -- a plain source of many channels, is many times slower with post-ops)
      local srcMem, wantSrc, temp = src.mem, queryMd(pd, ARG.SRC), nil
      if lib().dnnl_memory_desc_equal(wantSrc, src.md) == 0 then
        temp = alloc.take(tonumber(lib().dnnl_memory_desc_get_size(wantSrc)))
        srcMem = memory(wantSrc, temp.p)
        steps[#steps + 1] = reorderStep(src.md, src.mem, wantSrc, srcMem)
      end
      local args = { { ARG.SRC, srcMem }, { ARG.WEIGHTS, wMem } }
      if s.bias then
        local bMem = memory(keep(dnnl.md({ O })), nil)
        exe.user[#exe.user + 1] = bMem
        conv.biasIndex = #exe.user
        args[#args + 1] = { ARG.BIAS, bMem }
      end
      if s.bn then
        conv.scale, conv.shift = ffi.new('float[?]', O), ffi.new('float[?]', O)
        args[#args + 1] = { POST_OP_BASE * 1 + ARG_SRC_1, memory(channel, conv.scale) }
        args[#args + 1] = { POST_OP_BASE * 2 + ARG_SRC_1, memory(channel, conv.shift) }
      end
      if sum then
        args[#args + 1] = { POST_OP_BASE * ((s.bn and 2 or 0) + 1) + ARG_SRC_1, sum.mem }
      end
      newValue(s.dst, queryMd(pd, ARG.DST))
      if temp then alloc.give(temp) end
      args[#args + 1] = { ARG.DST, values[s.dst].mem }
      steps[#steps + 1] = step(primitive(pd, 'convolution'), args)
      steps[#steps].name = 'conv ' .. implName(pd)
    elseif s.kind == 'maxpool' then
      local pd, why = dnnl.pd('dnnl_pooling_forward_primitive_desc_create', 'max pooling',
        dnnl.FORWARD_INFERENCE, dnnl.POOLING_MAX, src.md, keep(dnnl.md(size, true)),
        dnnl.dims { s.dH, s.dW }, dnnl.dims { s.kH, s.kW }, dnnl.dims { 0, 0 },
        dnnl.dims { s.padH, s.padW }, dnnl.dims { math.max(0, padB), math.max(0, padR) }, nil)
      if not pd then return nil, why end
      keep(pd)
      newValue(s.dst, queryMd(pd, ARG.DST))
      steps[#steps + 1] = step(primitive(pd, 'pooling'), { { ARG.SRC, src.mem }, { ARG.DST, values[s.dst].mem } })
      steps[#steps].name = 'pool ' .. implName(pd)
    else
      error('plan_conv_compile: unknown step ' .. tostring(s.kind))
    end
    release(s.src, i)
    if s.sum then release(s.sum, i) end
  end
  local last = values[program.output]
  steps[#steps + 1] = reorderStep(last.md, last.mem, outMd, outMem)
  exe.main = table.remove(steps)
  exe.before = steps
  return exe
end

-- scale = w / sqrt(var + eps), shift = b - mean * scale (w = 1, b = 0 without them)
local function foldStatistics(conv, bn)
  local m, v, ms, vs = ptr(bn.mean), ptr(bn.var), bn.mean:stride(1), bn.var:stride(1)
  local w, b = bn.weight and ptr(bn.weight), bn.bias and ptr(bn.bias)
  local ws, bs = bn.weight and bn.weight:stride(1), bn.bias and bn.bias:stride(1)
  local scale, shift, eps = conv.scale, conv.shift, bn.eps
  for c = 0, conv.O - 1 do
    local k = 1 / math.sqrt(v[c * vs] + eps)
    if w then k = k * w[c * ws] end
    scale[c] = k
    shift[c] = (b and b[c * bs] or 0) - m[c * ms] * k
  end
end

local handles = {}

backend.register('cpu', {
  -- whether plans serve tensors like t (Float, with oneDNN on)
  plan_conv_supported = function(t)
    return dnnl.available and dnnl.enabled and torch.typename(t) == 'torch.FloatTensor'
  end,
  -- the thread count the next run would get (exes are made per count)
  plan_conv_threads = function() return convdnnl.threads() end,
  plan_conv_compile = function(program, threads)
    dnnl.setThreads(threads)
    local exe, why = compile(program)
    if exe then exe.threads = threads end
    return exe, why
  end,
  plan_conv_run = function(exe, input, output, params)
    local n, held = #exe.user, {}
    handles[1], handles[2] = ptr(input), ptr(output)
    for i, conv in ipairs(exe.convs) do
      local p = params[i]
      local w = p.weight:contiguous()
      held[#held + 1] = w
      handles[conv.weightIndex] = ptr(w)
      if conv.biasIndex then
        local b = p.bias:contiguous()
        held[#held + 1] = b
        handles[conv.biasIndex] = ptr(b)
      end
      if conv.scale then foldStatistics(conv, p.bn) end
    end
    dnnl.run(exe, unpack(handles, 1, n))
    return held
  end,
})

-- For profiles (bench/plans_conv.lua): the milliseconds of each step of exe, run alone `reps`
-- times after a run of the whole exe (which set the buffers' handles).
local nnPlan = {}
function nnPlan.profile(exe, reps)
  local sys = require 'sys'
  local list = {}
  for _, s in ipairs(exe.before) do list[#list + 1] = s end
  list[#list + 1] = exe.main
  local times = {}
  for i, s in ipairs(list) do
    local one = { before = {}, main = s, after = {}, user = {}, threads = exe.threads }
    dnnl.run(one)
    local t0 = sys.clock()
    for _ = 1, reps do dnnl.run(one) end
    times[i] = { name = s.name, ms = (sys.clock() - t0) / reps * 1000 }
  end
  return times
end
return nnPlan
