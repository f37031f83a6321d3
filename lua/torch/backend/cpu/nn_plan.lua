-- The CPU ops of whole-model plans (lua/nn/util/plan_conv.lua plans; the CUDA file lacks them):
-- a run of convolutions (each with its batch normalization in evaluation as per-channel
-- multiply and add post-ops, a residual add as a binary add post-op and ReLU as an eltwise post-op)
-- and max poolings compiled into oneDNN primitives over activations kept in the blocked
-- layouts oneDNN picks: the run's input is read as it is (plain NCHW), its output reordered
-- once into the caller's plain tensor, and nothing in between leaves oneDNN's layouts.
--
-- plan_conv_compile(program) makes the primitives for one thread count (nil, reason when
-- oneDNN refuses a step); plan_conv_run(exe, input, output, params) runs them on the current
-- weights and statistics (read at each run: an optimizer's step is seen by the next run). A
-- convolution's weights reordered into oneDNN's blocked layout are kept from one run to the next
-- while their buffer's write version, offset, sizes and strides stay those of the run that
-- reordered them and the buffer never escaped (core/versions.lua; versions.cacheWeights = false
-- reorders them at every run).
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
local object = require 'torch.core.object'
local versions = require 'torch.core.versions'

local ptr = apply.ptr

-- oneDNN v3.2's post-op API (dnnl.h); declared one by one so that a declaration another file
-- makes first is kept
for _, decl in ipairs {
  'dnnl_status_t dnnl_post_ops_append_eltwise(dnnl_post_ops_t post_ops, int alg_kind, float alpha, float beta);',
  'dnnl_status_t dnnl_post_ops_append_binary(dnnl_post_ops_t post_ops, int alg_kind, const dnnl_memory_desc_t src1_desc);',
  'dnnl_status_t dnnl_primitive_desc_query(const dnnl_primitive_desc_t pd, int what, int index, void *result);',
  'dnnl_status_t dnnl_primitive_attr_set_scales_mask(dnnl_primitive_attr_t attr, int arg, int mask);',
} do pcall(ffi.cdef, decl) end
local QUERY_IMPL_INFO = 8   -- dnnl_query_impl_info_str

local RELU, BINARY_ADD, BINARY_MUL = 0x20, 0x1fff0, 0x1fff1
local FUSE_NORM_RELU = 0x8   -- dnnl_fuse_norm_relu
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

-- a primitive attribute and an empty post-op list, each released with its last reference
local function attrAndOps()
  local attr = ffi.new('dnnl_primitive_attr_t[1]')
  check(lib().dnnl_primitive_attr_create(attr), 'primitive_attr_create')
  local ops = ffi.new('dnnl_post_ops_t[1]')
  check(lib().dnnl_post_ops_create(ops), 'post_ops_create')
  return ffi.gc(attr[0], lib().dnnl_primitive_attr_destroy), ffi.gc(ops[0], lib().dnnl_post_ops_destroy)
end

-- to (laid out as toMd) = scale * from + to: a reorder with a source scale (scaleMem, one float
-- read at each run) and a sum post-op; nil where oneDNN declines it
local ARG_ATTR_SCALES = 4096
local function accumulateStep(fromMd, fromMem, toMd, toMem, scaleMem)
  local attr, ops = attrAndOps()
  check(lib().dnnl_post_ops_append_sum(ops, 1, 0, 0), 'post_ops_append_sum')
  check(lib().dnnl_primitive_attr_set_post_ops(attr, ops), 'primitive_attr_set_post_ops')
  local pd = ffi.new('dnnl_primitive_desc_t[1]')
  if lib().dnnl_primitive_attr_set_scales_mask(attr, ARG_FROM, 0) ~= 0
      or lib().dnnl_reorder_primitive_desc_create(pd, fromMd, dnnl.engine, toMd, dnnl.engine, attr) ~= 0 then
    return nil
  end
  local p = primitive(pd[0], 'reorder')
  local s = step(p, { { ARG_FROM, fromMem }, { ARG_TO, toMem }, { ARG_ATTR_SCALES + ARG_FROM, scaleMem } })
  s.name = 'reorder+= ' .. implName(pd[0])
  lib().dnnl_primitive_desc_destroy(pd[0])
  return s
end

-- The attributes of a convolution: [x scale, + shift (per channel)] [+ sum (a value like dst)]
-- [relu].
local function postOps(C, bn, sum, relu)
  local attr, ops = attrAndOps()
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
  local exe = { before = {}, after = {}, user = {}, keep = {}, convs = {}, bns = {} }
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
    local padB = s.kH and (oH - 1) * s.dH + s.kH - H - s.padH
    local padR = s.kW and (oW - 1) * s.dW + s.kW - W - s.padW
    if s.kind == 'bn' then
      -- a pre-activation's batch norm [+ ReLU] with the running statistics: one pass over the
      -- activation where it lies (its layout in, the same out)
      local flags = dnnl.USE_GLOBAL_STATS + dnnl.USE_SCALE + dnnl.USE_SHIFT + (s.relu and FUSE_NORM_RELU or 0)
      local pd, why = dnnl.pd('dnnl_batch_normalization_forward_primitive_desc_create', 'batch normalization',
        dnnl.FORWARD_INFERENCE, src.md, src.md, s.eps, flags, nil)
      if not pd then return nil, why end
      keep(pd)
      local bn = { C = C }
      local channel = keep(dnnl.md({ C }))
      local args = { { ARG.SRC, src.mem } }
      for _, k in ipairs { 'mean', 'var', 'scale', 'shift' } do bn[k] = ffi.new('float[?]', C) end
      args[2], args[3] = { ARG.MEAN, memory(channel, bn.mean) }, { ARG.VARIANCE, memory(channel, bn.var) }
      args[4], args[5] = { ARG.SCALE, memory(channel, bn.scale) }, { ARG.SHIFT, memory(channel, bn.shift) }
      exe.bns[#exe.bns + 1] = bn
      newValue(s.dst, queryMd(pd, ARG.DST))
      args[6] = { ARG.DST, values[s.dst].mem }
      steps[#steps + 1] = step(primitive(pd, 'batch normalization'), args)
      steps[#steps].name = 'bn ' .. implName(pd)
    elseif s.kind == 'conv' then
      local wSizes = { O, C, s.kH, s.kW }
      local function convPd(dstMd, attr)
        return dnnl.pd('dnnl_convolution_forward_primitive_desc_create', 'convolution forward',
          dnnl.FORWARD_INFERENCE, dnnl.CONVOLUTION_DIRECT, keep(dnnl.md(program.values[s.src], true)),
          keep(dnnl.md(wSizes, true)),
          s.bias and keep(dnnl.md({ O })) or nil, dstMd, dnnl.dims { s.dH, s.dW }, dnnl.dims { 0, 0 },
          dnnl.dims { s.padH, s.padW }, dnnl.dims { padB, padR }, attr)
      end
      local sum, sumTemp = s.sum and values[s.sum], nil
      if sum then
        -- the residual's shortcut in the layout this convolution picks for its output: oneDNN's
        -- jit kernels take a binary post-op's operand (and the output) in that layout only, and
        -- in another (a segment's plain input as the shortcut) its reference kernel runs, some
        -- 50 times slower (a CIFAR ResNet's first block after a table-output module)
        local probe = convPd(keep(dnnl.md(size, true)), keep((postOps(O, s.bn, nil, s.relu))))
        local want = probe and keep(probe) and queryMd(probe, ARG.DST)
        if want and lib().dnnl_memory_desc_equal(want, sum.md) == 0 then
          sumTemp = alloc.take(tonumber(lib().dnnl_memory_desc_get_size(want)))
          local mem = memory(want, sumTemp.p)
          steps[#steps + 1] = reorderStep(sum.md, sum.mem, want, mem)
          sum = { md = want, mem = mem }
        end
      end
      local attr, channel = postOps(O, s.bn, sum and sum.md, s.relu)
      keep(attr)
      local dstMd = sum and sum.md or keep(dnnl.md(size, true))
      local pd, why = convPd(dstMd, attr)
      if not pd then return nil, why end
      keep(pd)
      local conv = { O = O }
      exe.convs[#exe.convs + 1] = conv
      -- the weights: reordered from the caller's plain tensor, at each run where they changed
      local userW = keep(dnnl.md(wSizes))
      local wMem = memory(userW, nil)
      exe.user[#exe.user + 1] = wMem
      conv.weightIndex = #exe.user
      local wantW = queryMd(pd, ARG.WEIGHTS)
      if lib().dnnl_memory_desc_equal(wantW, userW) == 0 then
        local blocked = memory(wantW, ALLOCATE)
        keep(blocked)
        steps[#steps + 1] = reorderStep(userW, wMem, wantW, blocked)
        steps[#steps].weightOf = conv   -- skipped while conv's cached weights are current
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
      if sumTemp then alloc.give(sumTemp) end
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
  -- what a run executes: exe.before less the weight reorders it skips
  exe.running = { before = {}, main = exe.main, after = exe.after, user = exe.user }
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

-- a 1-D tensor's n values into floats
local function gather(buf, t, n)
  local p, s = ptr(t), t:stride(1)
  for i = 0, n - 1 do buf[i] = p[i * s] end
end

local handles = {}

-- The blocked weights of a convolution are current when its weight tensor lies where it lay at
-- the reorder (the same root storage, first element's address, sizes and strides) and the root's
-- write version is the one it had then; an escaped buffer is never kept. (A storage viewing
-- another bumps and escapes its root; the address tells apart the buffers a root had across
-- resizes, each of which bumped it.)
local fields = object.fields
local function weightPlace(w)
  local tf = fields[w]
  local st = tf._st
  if not st then return nil end
  local sf = fields[st]
  local root = sf._base or st
  local rf = fields[root]
  -- a buffer viewed from Python counts as escaped while a view lives (versions.unviewed bumps
  -- the root when the last one went)
  if not rf._esc and not versions.unviewed(sf._id, root) then return root, nil end
  return root, rf, sf._ptr + tf._off, tf._sz, tf._str
end

local function current(conv, w)
  local root, rf, at, sz, str = weightPlace(w)
  if root == nil or rf == nil or root ~= conv.root or rf._esc or rf._ver ~= conv.ver or at ~= conv.at
      or #sz ~= #conv.sz then
    return false
  end
  local csz, cstr = conv.sz, conv.str
  for d = 1, #sz do
    if sz[d] ~= csz[d] or str[d] ~= cstr[d] then return false end
  end
  return true
end

-- after a run that reordered conv's weights from w: what they were reordered from (nothing for
-- an escaped buffer, or one the run's output shares)
local function remember(conv, w, output)
  versions.watch()   -- from now on every write moves the versions this keeps
  local root, rf, at, sz, str = weightPlace(w)
  if root == nil or rf == nil or rf._esc or versions.root(output) == root then conv.root = nil; return end
  conv.root, conv.ver, conv.at = root, rf._ver, at
  local csz, cstr = conv.sz or {}, conv.str or {}
  for d = 1, #sz do csz[d], cstr[d] = sz[d], str[d] end
  for d = #sz + 1, #csz do csz[d], cstr[d] = nil, nil end
  conv.sz, conv.str = csz, cstr
end

-- handles[index] = t's data, contiguous (the contiguous copy, if made, kept in held for the run)
local function point(handles, held, index, t)
  local c = t:contiguous()
  held[#held + 1] = c
  handles[index] = ptr(c)
end

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
    local cache = versions.cacheWeights
    for i, conv in ipairs(exe.convs) do
      local p = params[i]
      point(handles, held, conv.weightIndex, p.weight)
      if conv.biasIndex then point(handles, held, conv.biasIndex, p.bias) end
      if conv.scale then foldStatistics(conv, p.bn) end
      conv.skip = cache and conv.root ~= nil and current(conv, p.weight)
      if not conv.skip then conv.root = nil end   -- until this run has reordered them
    end
    local running, nb, hits = exe.running, 0, 0
    local list = running.before
    for _, s in ipairs(exe.before) do
      if s.weightOf and s.weightOf.skip then
        hits = hits + 1
      else
        nb = nb + 1
        list[nb] = s
        if s.weightOf then s.weightOf.reordered = true end
      end
    end
    for k = nb + 1, #list do list[k] = nil end
    running.threads = exe.threads
    for i, bn in ipairs(exe.bns) do
      local p = params.bn[i]
      gather(bn.mean, p.mean, bn.C); gather(bn.var, p.var, bn.C)
      if p.weight then gather(bn.scale, p.weight, bn.C) else for c = 0, bn.C - 1 do bn.scale[c] = 1 end end
      if p.bias then gather(bn.shift, p.bias, bn.C) else ffi.fill(bn.shift, 4 * bn.C) end
    end
    dnnl.run(running, unpack(handles, 1, n))
    versions.hits = versions.hits + hits
    for i, conv in ipairs(exe.convs) do
      if conv.reordered then
        conv.reordered = nil
        versions.reorders = versions.reorders + 1
        if cache then remember(conv, params[i].weight, output) end
      end
    end
    return held
  end,
})

------------------------------------------------------------------------------------------------
-- Training plans (lua/nn/util/plan_train.lua): a run of convolutions, batch normalizations with
-- their batch's statistics (a ReLU after one fused: oneDNN's fuse_norm_relu, its mask kept in a
-- workspace for the backward), residual adds (a ReLU after one as a post-op) and max poolings,
-- forward and backward, every activation and gradient in the layouts oneDNN picks. The forward
-- keeps what the backward reads (the activations, the batches' statistics, the masks); the
-- backward accumulates the weights' gradients into the modules' tensors (scale as torch7's).
--
-- The program: { input = sizes, output = id, values = { [id] = sizes }, inputGrad = bool,
--   steps = { { kind = 'conv', src, dst, kH, kW, dH, dW, padH, padW, bias = bool },
--             { kind = 'bn', src, dst, relu = bool, affine = bool, eps },
--             { kind = 'add', a, b, dst, relu = bool },
--             { kind = 'maxpool', src, dst, kH, kW, dH, dW, padH, padW } } }
-- program.pool: the buffers (a table the caller keeps with the program; filled here).
-- params[i] for step i: conv { weight, bias, gradWeight, gradBias }; bn { module = the
-- SpatialBatchNormalization } (its tensors read and written at each run).
require 'torch.backend.cpu.dnnl_eltwise'   -- declares the eltwise and binary primitives
local blas = require 'torch.backend.cpu.blas'
local RELU_USE_DST = 0x100

-- a ReLU as a post-op (the residual add's)
local function reluAttr() return (postOps(nil, false, nil, true)) end

local function named(s, name, pd) s.name = name .. ' ' .. implName(pd); return s end

-- Gives each of a training exe's buffers ({ mem, bytes }) its memory: buffers whose uses (from
-- the first step reading or writing one to the last, in the order the steps run: the lists
-- `order`, the forward's then the backward's) do not overlap share a slot, as a gradient does
-- with the activations the backward has done with and with the gradients before it. Slot k is
-- the k-th tensor of pool, which the exes made for other thread counts share (one runs at a
-- time, its forward and backward together); a slot too small for this exe gets a new tensor.
-- No step relies on a buffer's contents from an earlier run: each is written before it is read.
local function placeBuffers(buffers, order, pool, keep)
  local byMem = {}
  for _, b in ipairs(buffers) do byMem[tostring(ffi.cast('uintptr_t', b.mem))] = b end
  local t = 0
  for _, list in ipairs(order) do
    for _, s in ipairs(list) do
      t = t + 1
      for j = 0, s.n - 1 do
        local b = byMem[tostring(ffi.cast('uintptr_t', s.args[j].memory))]
        if b then b.first = b.first or t; b.last = t end
      end
    end
  end
  local used = {}
  for _, b in ipairs(buffers) do if b.first then used[#used + 1] = b end end
  table.sort(used, function(x, y) return x.first < y.first or (x.first == y.first and x.bytes > y.bytes) end)
  local slots = {}   -- { bytes, busyUntil }
  for _, b in ipairs(used) do
    -- of the free slots, the smallest that holds b, else the largest (grown)
    local best
    for k, slot in ipairs(slots) do
      if slot.busyUntil < b.first then
        local other = slots[best]
        if not other then best = k
        else
          local fits, otherFits = slot.bytes >= b.bytes, other.bytes >= b.bytes
          if fits ~= otherFits then
            if fits then best = k end
          elseif (fits and slot.bytes < other.bytes) or (not fits and slot.bytes > other.bytes) then
            best = k
          end
        end
      end
    end
    if not best then slots[#slots + 1] = { bytes = 0, busyUntil = 0 }; best = #slots end
    local slot = slots[best]
    slot.bytes, slot.busyUntil, b.slot = math.max(slot.bytes, b.bytes), b.last, best
  end
  for k, slot in ipairs(slots) do
    local n = math.max(1, math.ceil(slot.bytes / 4))
    if not pool[k] or pool[k]:nElement() < n then pool[k] = torch.FloatTensor(n) end
    keep(pool[k])
  end
  for _, b in ipairs(used) do lib().dnnl_memory_set_data_handle(b.mem, ptr(pool[b.slot])) end
  local buffered, slotted = 0, 0
  for _, b in ipairs(used) do buffered = buffered + b.bytes end
  for _, slot in ipairs(slots) do slotted = slotted + slot.bytes end
  return buffered, slotted
end

-- Switches read when a training exe is made (tests compare both paths): fusedAccumulate, a
-- convolution's weight gradient added into gradWeight by the reorder out of oneDNN's layout
-- (else reordered into a buffer of the plan's, then added).
local trainOptions = { fusedAccumulate = true }

local function trainCompile(program)
  local exe = { keep = {}, convs = {}, bns = {} }
  holding = exe.keep
  local function keep(x) exe.keep[#exe.keep + 1] = x; return x end
  local fwdUser, bwdUser = {}, {}
  local F, B = {}, {}
  local values, info = {}, {}
  -- a buffer laid out as md: its memory comes once every step is made (placeBuffers), from
  -- the program's pool
  local buffers = {}
  local function buffer(md)
    local mem = memory(md, nil)
    buffers[#buffers + 1] = { mem = mem, bytes = tonumber(lib().dnnl_memory_desc_get_size(md)) }
    return mem
  end
  -- mem (laid out as md) in the layout want, through a reorder appended to list where they
  -- differ, into a buffer (or, with own, memory oneDNN allocates)
  local function laidOut(list, md, mem, want, own)
    if lib().dnnl_memory_desc_equal(want, md) ~= 0 then return mem end
    local to = own and keep(memory(want, ALLOCATE)) or buffer(want)
    list[#list + 1] = reorderStep(md, mem, want, to)
    return to
  end
  local function userMemory(list, md)
    list[#list + 1] = memory(md, nil)
    return list[#list], #list
  end
  local function add(dst, src)   -- dst += src (same layout)
    local pd, why = dnnl.pd('dnnl_binary_primitive_desc_create', 'binary add', BINARY_ADD, dst.md, dst.md, dst.md, nil)
    if not pd then error(why, 0) end
    B[#B + 1] = named(step(primitive(pd, 'binary'), { { ARG.SRC, dst.mem }, { ARG_SRC_1, src }, { ARG.DST, dst.mem } }),
      'add', pd)
  end
  local inMd = keep(dnnl.md(program.input))
  values[0] = { md = inMd, mem = userMemory(fwdUser, inMd) }
  local outMd = keep(dnnl.md(program.values[program.output]))
  local outMem = userMemory(fwdUser, outMd)

  for i, s in ipairs(program.steps) do
    local src, size, inSize = values[s.src], program.values[s.dst], program.values[s.src or s.a]
    if s.kind == 'conv' then
      local O, C, H, W = size[2], inSize[2], inSize[3], inSize[4]
      local padB = (size[3] - 1) * s.dH + s.kH - H - s.padH
      local padR = (size[4] - 1) * s.dW + s.kW - W - s.padW
      local g = { wSizes = { O, C, s.kH, s.kW }, strides = dnnl.dims { s.dH, s.dW }, dil = dnnl.dims { 0, 0 },
        padL = dnnl.dims { s.padH, s.padW }, padR = dnnl.dims { padB, padR } }
      local pd, why = dnnl.pd('dnnl_convolution_forward_primitive_desc_create', 'convolution forward',
        dnnl.FORWARD_TRAINING, dnnl.CONVOLUTION_DIRECT, keep(dnnl.md(inSize, true)), keep(dnnl.md(g.wSizes, true)),
        s.bias and keep(dnnl.md({ O })) or nil, keep(dnnl.md(size, true)), g.strides, g.dil, g.padL, g.padR, nil)
      if not pd then return nil, why end
      keep(pd)
      local conv = { step = i, O = O, n = O * C * s.kH * s.kW }
      exe.convs[#exe.convs + 1] = conv
      local userW = keep(dnnl.md(g.wSizes))
      local wMem
      wMem, conv.fwdWeight = userMemory(fwdUser, userW)
      wMem = laidOut(F, userW, wMem, queryMd(pd, ARG.WEIGHTS), true)
      local srcMd = queryMd(pd, ARG.SRC)
      local srcMem = laidOut(F, src.md, src.mem, srcMd)
      local args = { { ARG.SRC, srcMem }, { ARG.WEIGHTS, wMem } }
      if s.bias then
        local bMem
        bMem, conv.fwdBias = userMemory(fwdUser, keep(dnnl.md({ O })))
        args[#args + 1] = { ARG.BIAS, bMem }
      end
      local dstMd = queryMd(pd, ARG.DST)
      values[s.dst] = { md = dstMd, mem = buffer(dstMd) }
      args[#args + 1] = { ARG.DST, values[s.dst].mem }
      F[#F + 1] = named(step(primitive(pd, 'convolution'), args), 'conv', pd)
      info[i] = { pd = pd, g = g, conv = conv, srcMd = srcMd, srcMem = srcMem }
    elseif s.kind == 'bn' then
      local C = size[2]
      local flags = (s.affine and dnnl.USE_SCALE + dnnl.USE_SHIFT or 0) + (s.relu and FUSE_NORM_RELU or 0)
      local pd, why = dnnl.pd('dnnl_batch_normalization_forward_primitive_desc_create', 'batch normalization forward',
        dnnl.FORWARD_TRAINING, src.md, src.md, s.eps, flags, nil)
      if not pd then return nil, why end
      keep(pd)
      local bn = { step = i, C = C, n = size[1] * size[3] * size[4] }
      for _, k in ipairs { 'mean', 'var', 'scale', 'shift', 'dscale', 'dshift' } do bn[k] = ffi.new('float[?]', C) end
      exe.bns[#exe.bns + 1] = bn
      local channel = keep(dnnl.md({ C }))
      local m = {}
      for _, k in ipairs { 'mean', 'var', 'scale', 'shift', 'dscale', 'dshift' } do m[k] = memory(channel, bn[k]) end
      local dstMd = queryMd(pd, ARG.DST)
      values[s.dst] = { md = dstMd, mem = buffer(dstMd) }
      local args = { { ARG.SRC, src.mem }, { ARG.DST, values[s.dst].mem }, { ARG.MEAN, m.mean }, { ARG.VARIANCE, m.var } }
      if s.affine then args[#args + 1] = { ARG.SCALE, m.scale }; args[#args + 1] = { ARG.SHIFT, m.shift } end
      local ws
      if s.relu then
        ws = buffer(queryMd(pd, ARG.WORKSPACE))
        args[#args + 1] = { ARG.WORKSPACE, ws }
      end
      F[#F + 1] = named(step(primitive(pd, 'batch normalization'), args), 'bn', pd)
      info[i] = { pd = pd, flags = flags, bn = bn, m = m, ws = ws }
    elseif s.kind == 'add' then
      local a, b = values[s.a], values[s.b]
      local attr = s.relu and keep(reluAttr()) or nil
      local pd, why = dnnl.pd('dnnl_binary_primitive_desc_create', 'binary add', BINARY_ADD, a.md, b.md, a.md, attr)
      if not pd then return nil, why end
      keep(pd)
      values[s.dst] = { md = a.md, mem = buffer(a.md) }
      F[#F + 1] = named(step(primitive(pd, 'binary'), { { ARG.SRC, a.mem }, { ARG_SRC_1, b.mem },
        { ARG.DST, values[s.dst].mem } }), 'add', pd)
    elseif s.kind == 'maxpool' then
      local H, W = inSize[3], inSize[4]
      local padB = math.max(0, (size[3] - 1) * s.dH + s.kH - H - s.padH)
      local padR = math.max(0, (size[4] - 1) * s.dW + s.kW - W - s.padW)
      local g = { strides = dnnl.dims { s.dH, s.dW }, kernel = dnnl.dims { s.kH, s.kW }, dil = dnnl.dims { 0, 0 },
        padL = dnnl.dims { s.padH, s.padW }, padR = dnnl.dims { padB, padR } }
      local pd, why = dnnl.pd('dnnl_pooling_forward_primitive_desc_create', 'max pooling', dnnl.FORWARD_TRAINING,
        dnnl.POOLING_MAX, src.md, keep(dnnl.md(size, true)), g.strides, g.kernel, g.dil, g.padL, g.padR, nil)
      if not pd then return nil, why end
      keep(pd)
      local dstMd = queryMd(pd, ARG.DST)
      values[s.dst] = { md = dstMd, mem = buffer(dstMd) }
      local ws = buffer(queryMd(pd, ARG.WORKSPACE))
      F[#F + 1] = named(step(primitive(pd, 'pooling'), { { ARG.SRC, src.mem }, { ARG.DST, values[s.dst].mem },
        { ARG.WORKSPACE, ws } }), 'pool', pd)
      info[i] = { pd = pd, g = g, ws = ws }
    else
      error('plan_train_compile: unknown step ' .. tostring(s.kind))
    end
  end
  local last = values[program.output]
  F[#F + 1] = reorderStep(last.md, last.mem, outMd, outMem)

  -- the backward, from the gradient of the output (plain, reordered into the output's layout)
  local diffs = {}
  local gradOutMem = userMemory(bwdUser, outMd)
  local gradInMem = program.inputGrad and userMemory(bwdUser, inMd) or nil
  do
    local d = buffer(last.md)
    B[#B + 1] = reorderStep(outMd, gradOutMem, last.md, d)
    diffs[program.output] = d
  end
  -- the gradient of value id gets what produce(mem) writes: into its own buffer the first time,
  -- else into a scratch one then added
  local function contribute(id, produce)
    local v = values[id]
    if not diffs[id] then
      diffs[id] = buffer(v.md)
      return produce(diffs[id])
    end
    local scratch = buffer(v.md)
    local ok, why = produce(scratch)
    if ok == nil and why then return nil, why end
    add({ md = v.md, mem = diffs[id] }, scratch)
    return true
  end
  local function wanted(id) return id ~= 0 or program.inputGrad end
  for i = #program.steps, 1, -1 do
    local s, it = program.steps[i], info[i]
    local gd = diffs[s.dst]
    local dstMd = values[s.dst].md
    local ok, why = true, nil
    if s.kind == 'conv' then
      local g, conv = it.g, it.conv
      local O = program.values[s.dst][2]
      local wpd
      -- the layouts oneDNN picks for the source and the gradient (the forward's, where it reads
      -- a plain source of few channels, take its reference kernel): reordered where they differ
      wpd, why = dnnl.pd('dnnl_convolution_backward_weights_primitive_desc_create', 'convolution backward weights',
        dnnl.CONVOLUTION_DIRECT, keep(dnnl.md(program.values[s.src], true)), keep(dnnl.md(g.wSizes, true)),
        s.bias and keep(dnnl.md({ O })) or nil, keep(dnnl.md(program.values[s.dst], true)), g.strides, g.dil,
        g.padL, g.padR, it.pd, nil)
      if not wpd then return nil, why end
      keep(wpd)
      local srcMem = laidOut(B, it.srcMd, it.srcMem, queryMd(wpd, ARG.SRC))
      local gdW = laidOut(B, dstMd, gd, queryMd(wpd, ARG.DIFF_DST))
      local dwMd = queryMd(wpd, ARG.DIFF_WEIGHTS)
      local plainW = keep(dnnl.md(g.wSizes))
      local args = { { ARG.SRC, srcMem }, { ARG.DIFF_DST, gdW } }
      local after
      if lib().dnnl_memory_desc_equal(dwMd, plainW) == 0 then
        local blocked = buffer(dwMd)
        args[#args + 1] = { ARG.DIFF_WEIGHTS, blocked }
        if trainOptions.fusedAccumulate then
          -- out of the blocked layout straight into the module's gradWeight (contiguous, as
          -- plan_train.lua plans it): gradWeight = scale * gradient + gradWeight in one reorder,
          -- instead of a reorder into a plain buffer and an axpy over it
          local dst, index = userMemory(bwdUser, plainW)
          local scale = ffi.new('float[1]')
          after = accumulateStep(dwMd, blocked, plainW, dst, memory(keep(dnnl.md({ 1 })), scale))
          if after then conv.bwdGrad, conv.scale = index, scale else table.remove(bwdUser) end
        end
        if not after then
          conv.gw = ffi.new('float[?]', conv.n)
          after = reorderStep(dwMd, blocked, plainW, memory(plainW, conv.gw))
        end
      else
        conv.gw = ffi.new('float[?]', conv.n)
        args[#args + 1] = { ARG.DIFF_WEIGHTS, memory(plainW, conv.gw) }
      end
      if s.bias then
        conv.gb = ffi.new('float[?]', O)
        args[#args + 1] = { ARG.DIFF_BIAS, memory(keep(dnnl.md({ O })), conv.gb) }
      end
      B[#B + 1] = named(step(primitive(wpd, 'convolution backward weights'), args), 'conv bwd weights', wpd)
      if after then B[#B + 1] = after end
      if wanted(s.src) then
        ok, why = contribute(s.src, function(mem)
          -- in the layout oneDNN picks, then reordered into the value's where they differ (a
          -- plain gradient, asked for, runs its reference kernel: seconds, not milliseconds)
          local target = mem
          local dpd, w = dnnl.pd('dnnl_convolution_backward_data_primitive_desc_create', 'convolution backward data',
            dnnl.CONVOLUTION_DIRECT, keep(dnnl.md(program.values[s.src], true)), keep(dnnl.md(g.wSizes, true)), dstMd,
            g.strides, g.dil, g.padL, g.padR, it.pd, nil)
          if not dpd then return nil, w end
          keep(dpd)
          if lib().dnnl_memory_desc_equal(queryMd(dpd, ARG.DIFF_DST), dstMd) == 0 then
            return nil, 'convolution backward data: another layout'
          end
          local srcMd = queryMd(dpd, ARG.DIFF_SRC)
          if lib().dnnl_memory_desc_equal(srcMd, values[s.src].md) == 0 then mem = buffer(srcMd) end
          local wMem
          wMem, conv.bwdWeight = userMemory(bwdUser, plainW)
          wMem = laidOut(B, plainW, wMem, queryMd(dpd, ARG.WEIGHTS), true)
          B[#B + 1] = named(step(primitive(dpd, 'convolution backward data'),
            { { ARG.DIFF_DST, gd }, { ARG.WEIGHTS, wMem }, { ARG.DIFF_SRC, mem } }), 'conv bwd data', dpd)
          if mem ~= target then B[#B + 1] = reorderStep(srcMd, mem, values[s.src].md, target) end
          return true
        end)
      end
    elseif s.kind == 'bn' then
      local srcMd = values[s.src].md
      local bpd
      bpd, why = dnnl.pd('dnnl_batch_normalization_backward_primitive_desc_create', 'batch normalization backward',
        s.affine and dnnl.BACKWARD or dnnl.BACKWARD_DATA, srcMd, dstMd, srcMd, s.eps, it.flags, it.pd, nil)
      if not bpd then return nil, why end
      keep(bpd)
      if s.affine or wanted(s.src) then
        local function produce(mem)
          local m = it.m
          local args = { { ARG.SRC, values[s.src].mem }, { ARG.DIFF_DST, gd }, { ARG.MEAN, m.mean },
            { ARG.VARIANCE, m.var }, { ARG.DIFF_SRC, mem } }
          if s.affine then
            args[#args + 1] = { ARG.SCALE, m.scale }
            args[#args + 1] = { ARG.DIFF_SCALE, m.dscale }
            args[#args + 1] = { ARG.DIFF_SHIFT, m.dshift }
          end
          if it.ws then args[#args + 1] = { ARG.WORKSPACE, it.ws } end
          B[#B + 1] = named(step(primitive(bpd, 'batch normalization backward'), args), 'bn bwd', bpd)
          return true
        end
        if wanted(s.src) then ok, why = contribute(s.src, produce) else ok, why = produce(buffer(srcMd)) end
      end
    elseif s.kind == 'add' then
      local G = gd
      if s.relu then
        local fpd, w = dnnl.pd('dnnl_eltwise_forward_primitive_desc_create', 'relu forward', dnnl.FORWARD_TRAINING,
          RELU_USE_DST, dstMd, dstMd, 0, 0, nil)
        if not fpd then return nil, w end
        keep(fpd)
        local bpd
        bpd, w = dnnl.pd('dnnl_eltwise_backward_primitive_desc_create', 'relu backward', RELU_USE_DST, dstMd, dstMd,
          dstMd, 0, 0, fpd, nil)
        if not bpd then return nil, w end
        keep(bpd)
        G = buffer(dstMd)
        B[#B + 1] = named(step(primitive(bpd, 'relu backward'), { { ARG.DIFF_DST, gd }, { ARG.DST, values[s.dst].mem },
          { ARG.DIFF_SRC, G } }), 'relu bwd', bpd)
      end
      -- both branches get G: as it is where their layout is the sum's, else reordered into theirs
      for _, id in ipairs { s.a, s.b } do
        if wanted(id) then
          local md = values[id].md
          local g = laidOut(B, dstMd, G, md)
          if not diffs[id] then diffs[id] = g else add({ md = md, mem = diffs[id] }, g) end
        end
      end
    elseif s.kind == 'maxpool' then
      ok, why = true, nil
      if wanted(s.src) then
        local srcMd = values[s.src].md
        local g = it.g
        ok, why = contribute(s.src, function(mem)
          local bpd, w = dnnl.pd('dnnl_pooling_backward_primitive_desc_create', 'max pooling backward', dnnl.POOLING_MAX,
            srcMd, dstMd, g.strides, g.kernel, g.dil, g.padL, g.padR, it.pd, nil)
          if not bpd then return nil, w end
          keep(bpd)
          B[#B + 1] = named(step(primitive(bpd, 'pooling backward'), { { ARG.DIFF_DST, gd }, { ARG.WORKSPACE, it.ws },
            { ARG.DIFF_SRC, mem } }), 'pool bwd', bpd)
          return true
        end)
      end
    end
    if not ok then return nil, why end
  end
  if program.inputGrad then
    if not diffs[0] then return nil, 'no gradient reaches the input' end
    B[#B + 1] = reorderStep(values[0].md, diffs[0], inMd, gradInMem)
  end
  exe.bufferBytes, exe.slotBytes = placeBuffers(buffers, { F, B }, program.pool, keep)
  exe.fwd = { before = F, main = table.remove(F), after = {}, user = fwdUser }
  exe.bwd = { before = B, main = table.remove(B), after = {}, user = bwdUser }
  exe.inputGrad = program.inputGrad
  return exe
end


-- dst (a tensor of n values) += scale * src (n floats)
local function accumulate(dst, src, n, scale)
  local p, s = ptr(dst), dst:dim() == 1 and dst:stride(1) or 1
  if blas.axpy then return blas.axpy(dst._dt, n, scale, src, 1, p, s) end
  for i = 0, n - 1 do p[i * s] = p[i * s] + scale * src[i] end
end

-- The names of a training exe's steps, forward then backward (oneDNN's implementation names:
-- tests check that no step runs a reference kernel).
local function nnPlan_trainSteps(exe)
  local names = {}
  for _, part in ipairs { exe.fwd, exe.bwd } do
    for _, s in ipairs(part.before) do names[#names + 1] = s.name or '?' end
    names[#names + 1] = part.main.name or '?'
  end
  return names
end

local trainHandles = {}

backend.register('cpu', {
  -- the names of exe's steps (oneDNN's implementations), forward then backward
  plan_train_steps = function(exe) return nnPlan_trainSteps(exe) end,
  plan_train_compile = function(program, threads)
    dnnl.setThreads(threads)
    local exe, why = trainCompile(program)
    if exe then exe.threads, exe.fwd.threads, exe.bwd.threads = threads, threads, threads end
    return exe, why
  end,
  -- output = the run's output; the batch normalizations' running statistics, save_mean and
  -- save_std as torch7's (save_std = 1 / sqrt(biased variance + eps), running_var from the
  -- unbiased variance)
  plan_train_forward = function(exe, input, output, params)
    local held = {}
    trainHandles[1], trainHandles[2] = ptr(input), ptr(output)
    for _, conv in ipairs(exe.convs) do
      local p = params[conv.step]
      point(trainHandles, held, conv.fwdWeight, p.weight)
      if conv.fwdBias then point(trainHandles, held, conv.fwdBias, p.bias) end
    end
    for _, bn in ipairs(exe.bns) do
      local m = params[bn.step].module
      if m.weight then gather(bn.scale, m.weight, bn.C); gather(bn.shift, m.bias, bn.C) end
    end
    dnnl.run(exe.fwd, unpack(trainHandles, 1, #exe.fwd.user))
    for _, bn in ipairs(exe.bns) do
      local m = params[bn.step].module
      local rm, rv = m.running_mean, m.running_var
      local rmp, rms, rvp, rvs = ptr(rm), rm:stride(1), ptr(rv), rv:stride(1)
      m.save_mean:resize(bn.C); m.save_std:resize(bn.C)
      local sm, ss, mo, eps, n = ptr(m.save_mean), ptr(m.save_std), m.momentum, m.eps, bn.n
      for c = 0, bn.C - 1 do
        local mean, var = bn.mean[c], bn.var[c]
        sm[c], ss[c] = mean, 1 / math.sqrt(var + eps)
        rmp[c * rms] = mo * mean + (1 - mo) * rmp[c * rms]
        rvp[c * rvs] = mo * var * n / (n - 1) + (1 - mo) * rvp[c * rvs]
      end
    end
    return held
  end,
  -- gradInput (when the program wants it) = the input's gradient; every planned module's
  -- gradWeight / gradBias += scale * its gradient
  plan_train_backward = function(exe, gradOutput, gradInput, params, scale)
    local held = {}
    trainHandles[1] = ptr(gradOutput)
    if exe.inputGrad then trainHandles[2] = ptr(gradInput) end
    for _, conv in ipairs(exe.convs) do
      local p = params[conv.step]
      if conv.bwdWeight then point(trainHandles, held, conv.bwdWeight, p.weight) end
      if conv.bwdGrad then
        local gw = p.gradWeight
        if not (gw:isContiguous() and gw:nElement() == conv.n) then
          error(('plan_train_backward: gradWeight of a planned convolution (%d elements) is not contiguous'
            .. ' or not of %d elements'):format(gw:nElement(), conv.n), 2)
        end
        trainHandles[conv.bwdGrad], conv.scale[0] = ptr(gw), scale
      end
    end
    for _, bn in ipairs(exe.bns) do
      local m = params[bn.step].module
      if m.weight then gather(bn.scale, m.weight, bn.C) end
    end
    dnnl.run(exe.bwd, unpack(trainHandles, 1, #exe.bwd.user))
    for _, conv in ipairs(exe.convs) do
      local p = params[conv.step]
      if conv.gw then accumulate(p.gradWeight, conv.gw, conv.n, scale) end
      if conv.gb then accumulate(p.gradBias, conv.gb, conv.O, scale) end
    end
    for _, bn in ipairs(exe.bns) do
      local m = params[bn.step].module
      if m.weight then
        accumulate(m.gradWeight, bn.dscale, bn.C, scale)
        accumulate(m.gradBias, bn.dshift, bn.C, scale)
      end
    end
    return held
  end,
})

-- For profiles (bench/plans_conv.lua): the milliseconds of each step of exe, run alone `reps`
-- times after a run of the whole exe (which set the buffers' handles).
local nnPlan = { trainSteps = nnPlan_trainSteps, trainOptions = trainOptions }
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
