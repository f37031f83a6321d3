-- The convolution and batch normalization passes on oneDNN (torch.backend.cpu.dnnl), for Float
-- tensors where the library is installed: the path PyTorch's CPU convolutions take, on all
-- torch.setnumthreads threads. The plain NCHW tensors are reordered into the blocked layouts oneDNN picks and
-- back (as PyTorch does); weights too, on each call (they change with every update).
--
-- A plan (primitive, reorders, their buffers) is made once per geometry, pass and thread
-- count, and shared by the modules of that geometry; at most MAX_PLANS are kept (all of them
-- are dropped at the next one).
--
-- SpatialFullConvolution is the same arithmetic with the roles swapped: its forward is a
-- convolution's backward-data pass, its backward a convolution's forward, its weight gradient
-- the backward-weights pass with input and gradOutput exchanged.
local ffi = require 'ffi'
local dnnl = require 'torch.backend.cpu.dnnl'
local blas = require 'torch.backend.cpu.blas'
local apply = require 'torch.backend.cpu.apply'
local parallel = require 'torch.backend.cpu.parallel'
local dtype = require 'torch.core.dtype'

-- the oneDNN functions declared here (dnnl.lua declares the core API)
ffi.cdef [[
dnnl_status_t dnnl_pooling_backward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int alg_kind, const dnnl_memory_desc_t diff_src,
  const dnnl_memory_desc_t diff_dst, const dnnl_dims_t strides, const dnnl_dims_t kernel,
  const dnnl_dims_t dilation, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
  const dnnl_primitive_desc_t hint_fwd_pd, const dnnl_primitive_attr_t attr);
]]
-- dnnl_types.h's average pooling kinds
local POOLING_AVG_INCLUDE_PADDING, POOLING_AVG_EXCLUDE_PADDING = 0x2ff, 0x3ff

local convdnnl = {}
local ptr = apply.ptr

-- Whether average pooling runs here (true by default; false keeps it on nn_pool.lua's loops):
-- bench/conv_passes.lua compares both.
convdnnl.pooling = { average = true }
local ARG = dnnl.ARG
local MAX_PLANS = 64

local plans, count = {}, 0

-- The oneDNN description of a convolution of image (B x C x H x W) with kernel
-- (O x C x kH x kW) to the output (B x O x oH x oW), or of g.groups groups (G): the kernel
-- G x O/G x C/G x kH x kW, output channel o from input channels of group floor(o / (O/G));
-- a volume likewise over T x H x W; nil when oneDNN cannot run it (another element type).
local function describe(g, dt)
  if dt.name ~= 'Float' then return nil end
  local lH, lW = g.dilationH or 1, g.dilationW or 1
  -- negative where the last windows leave input rows or columns unread (a 1x1 kernel of
  -- stride 2 on an even size): oneDNN takes that as PyTorch gives it
  local padBottom = (g.oH - 1) * g.dH + (g.kH - 1) * lH + 1 - g.H - g.padH
  local padRight = (g.oW - 1) * g.dW + (g.kW - 1) * lW + 1 - g.W - g.padW
  local G = g.groups or 1
  if g.T then   -- a volume (VolumetricConvolution, VolumetricFullConvolution): T x H x W
    local lT = g.dilationT or 1
    local padBack = (g.oT - 1) * g.dT + (g.kT - 1) * lT + 1 - g.T - g.padT
    return {
      key = table.concat({ g.B, g.C, g.T, g.H, g.W, g.O, g.kT, g.kH, g.kW, g.dT, g.dH, g.dW, g.padT, g.padH,
        g.padW, lT, lH, lW }, ' '),
      O = g.O, src = { g.B, g.C, g.T, g.H, g.W }, weights = { g.O, g.C, g.kT, g.kH, g.kW },
      dst = { g.B, g.O, g.oT, g.oH, g.oW }, bias = { g.O }, strides = dnnl.dims { g.dT, g.dH, g.dW },
      dilates = dnnl.dims { lT - 1, lH - 1, lW - 1 }, padL = dnnl.dims { g.padT, g.padH, g.padW },
      padR = dnnl.dims { padBack, padBottom, padRight },
    }
  end
  return {
    key = table.concat({ g.B, g.C, g.H, g.W, g.O, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, lH, lW, G }, ' '),
    C = G == 1 and g.C or nil, O = g.O,   -- (channels-last: neither for groups nor volumes)
    weights = G == 1 and { g.O, g.C, g.kH, g.kW } or { G, g.O / G, g.C / G, g.kH, g.kW },
    src = { g.B, g.C, g.H, g.W }, dst = { g.B, g.O, g.oH, g.oW },
    bias = { g.O }, strides = dnnl.dims { g.dH, g.dW }, dilates = dnnl.dims { lH - 1, lW - 1 },
    padL = dnnl.dims { g.padH, g.padW }, padR = dnnl.dims { padBottom, padRight },
  }
end

-- Channels-last activations (NHWC inside the primitive; the tensors stay NCHW) for the forward
-- and weight gradient passes where the input channels are not a multiple of 16 past the first
-- 16: oneDNN's blocked layout pads them to 16-channel blocks, its channels-last kernels do not.
-- Measured on one AVX-512 core, best of 8, ms blocked -> channels-last: LeNet's 20 -> 50 at
-- batch 256 forward 9.4 -> 6.1, weight gradient 10.8 -> 7.4 (on 2 threads 5.7 -> 3.4 and 6.0 ->
-- 4.3); 24 -> 32 1.9 -> 1.5; 50 -> 100 9.1 -> 7.6. gradInput (over the output channels) stays
-- blocked from 32 input channels: 64 -> 50 gained (6.8 -> 5.6) but 50 -> 100 lost (8.5 -> 9.3),
-- and DCGAN's first layer (a gradInput pass of 100 channels) took the whole forward from 153 to
-- 163 ms; below 32 (under two blocks, the second part padding) it is channels-last too: LeNet's
-- 20 -> 50 gradInput on 2 threads 1.50-1.58 against 1.61-1.62 ms at batch 64 and 5.60-5.82
-- against 5.91-6.27 at 256, 8 of 8 alternating pairs (bench/two_threads.lua's 2:nhwc=all).
-- Off (false): blocked everywhere.
convdnnl.channelsLast = true

function convdnnl.nhwc(C, O, pass)
  if not convdnnl.channelsLast or C <= 16 or C % 16 == 0 then return false end
  return pass ~= 'backward' or C < 32
end

-- an activation's descriptor in the primitive: channels-last, or the layout oneDNN picks
local function act(sizes, nhwc)
  if not nhwc then return dnnl.md(sizes, true) end
  local C, H, W = sizes[2], sizes[3], sizes[4]
  return dnnl.md(sizes, false, { H * W * C, 1, W * C, C })
end

-- The forward primitive descriptor (also the hint of the backward ones).
local function forwardPd(d, bias, nhwc)
  return dnnl.pd('dnnl_convolution_forward_primitive_desc_create', 'convolution forward',
    dnnl.FORWARD_TRAINING, dnnl.CONVOLUTION_DIRECT, act(d.src, nhwc), dnnl.md(d.weights, true),
    bias and dnnl.md(d.bias) or nil, act(d.dst, nhwc), d.strides, d.dilates, d.padL, d.padR, nil)
end

local makers = {
  forward = function(d, withBias, nhwc)
    local fwd = forwardPd(d, withBias, nhwc)
    return fwd and dnnl.plan(fwd, { { arg = ARG.SRC, sizes = d.src },
      { arg = ARG.WEIGHTS, sizes = d.weights },
      { arg = ARG.DST, sizes = d.dst, out = true },
      withBias and { arg = ARG.BIAS, sizes = d.bias } or nil })
  end,
  backward = function(d, _, nhwc)
    local fwd = forwardPd(d, false, nhwc)
    local pd = fwd and dnnl.pd('dnnl_convolution_backward_data_primitive_desc_create',
      'convolution backward data', dnnl.CONVOLUTION_DIRECT, act(d.src, nhwc),
      dnnl.md(d.weights, true), act(d.dst, nhwc), d.strides, d.dilates, d.padL, d.padR, fwd, nil)
    return pd and dnnl.plan(pd, { { arg = ARG.DIFF_DST, sizes = d.dst },
      { arg = ARG.WEIGHTS, sizes = d.weights },
      { arg = ARG.DIFF_SRC, sizes = d.src, out = true } })
  end,
  -- the weight gradient (and the bias's, the sums of gradOutput's planes) into plain buffers
  accGrad = function(d, withBias, nhwc)
    local fwd = forwardPd(d, withBias, nhwc)
    local pd = fwd and dnnl.pd('dnnl_convolution_backward_weights_primitive_desc_create',
      'convolution backward weights', dnnl.CONVOLUTION_DIRECT, act(d.src, nhwc),
      dnnl.md(d.weights, true), withBias and dnnl.md(d.bias) or nil, act(d.dst, nhwc),
      d.strides, d.dilates, d.padL, d.padR, fwd, nil)
    local specs = { { arg = ARG.SRC, sizes = d.src },
      { arg = ARG.DIFF_DST, sizes = d.dst },
      { arg = ARG.DIFF_WEIGHTS, sizes = d.weights, out = true } }
    if withBias then
      specs[4] = { arg = ARG.DIFF_BIAS, sizes = d.bias, out = true }
    end
    if not pd then return nil end
    local plan = dnnl.plan(pd, specs)
    local n = 1
    for _, size in ipairs(d.weights) do n = n * size end
    plan.gw, plan.gb = ffi.new('float[?]', n), withBias and ffi.new('float[?]', d.bias[1]) or nil
    plan.nw = n
    return plan
  end,
}

-- The thread count for the next primitive, made OpenMP's: torch.setnumthreads's, and no more
-- than the CPUs free at that moment (the BLAS calls' rule, blas.threadsFor: a parallel region
-- waits for its slowest thread, so one descheduled by other work stalls it).
function convdnnl.threads()
  local n = blas.threadsFor(math.huge, 1)
  dnnl.setThreads(n)
  return n
end

-- The plan of `pass` for description d (nil when oneDNN refuses the geometry: the caller's
-- kernels run it then).
local function planFor(pass, d, withBias)
  local threads = convdnnl.threads()
  local nhwc = d.C and convdnnl.nhwc(d.C, d.O, pass)
  local key = ('%s %s %s %d %s'):format(pass, d.key, tostring(withBias), threads, tostring(nhwc))
  local p = plans[key]
  if p == nil then
    if count >= MAX_PLANS then plans, count = {}, 0 end
    p = makers[pass](d, withBias, nhwc) or false
    if p then p.threads = threads end
    plans[key], count = p, count + 1
  end
  return p or nil
end


-- The description of the 2D or 3D geometry g (nn_conv.lua's), cached in g; nil when oneDNN is
-- off or does not serve it.
function convdnnl.of(g, dt)
  if not (dnnl.available and dnnl.enabled) then return nil end
  if g.dnnl == nil then g.dnnl = describe(g, dt) or false end
  return g.dnnl or nil
end

-- output = conv(input, weight) [+ bias]; false when oneDNN cannot (nothing written)
function convdnnl.forward(d, input, weight, bias, output)
  local plan = planFor('forward', d, bias ~= nil)
  if not plan then return false end
  if bias then
    if bias._str[1] ~= 1 then bias = bias:contiguous() end
    dnnl.run(plan, ptr(input), ptr(weight), ptr(output), ptr(bias))
  else
    dnnl.run(plan, ptr(input), ptr(weight), ptr(output))
  end
  return true
end

function convdnnl.backward(d, weight, gradOutput, gradInput)
  local plan = planFor('backward', d)
  if not plan then return false end
  dnnl.run(plan, ptr(gradOutput), ptr(weight), ptr(gradInput))
  return true
end

-- plane c of each of the B images of x (contiguous, C planes of N) += bias[c]
function convdnnl.addBias(x, bias, B, C, N)
  local p, b, bs = ptr(x), ptr(bias), bias._str[1]
  for i = 0, B * C - 1 do
    local v, o = b[(i % C) * bs], i * N
    for k = 0, N - 1 do p[o + k] = p[o + k] + v end
  end
end

-- dst (n floats, stride apart) += scale * src (n contiguous floats): BLAS's axpy (vectorized:
-- a ResNet-18 step adds 11.2M weight-gradient elements, 5.6 ms for one 512x512x3x3 in this
-- loop), else the loop.
local function accumulate(dt, dst, stride, src, n, scale)
  if blas.axpy then return blas.axpy(dt, n, scale, src, 1, dst, stride) end
  for i = 0, n - 1 do dst[i * stride] = dst[i * stride] + scale * src[i] end
end

-- gradWeight += scale * dW, gradBias (when given) += scale * the sums of gradOutput's planes
function convdnnl.accGrad(d, input, gradOutput, gradWeight, gradBias, scale)
  local plan = planFor('accGrad', d, gradBias ~= nil)
  if not plan then return false end
  if gradBias then
    dnnl.run(plan, ptr(input), ptr(gradOutput), plan.gw, plan.gb)
    accumulate(gradBias._dt, ptr(gradBias), gradBias._str[1], plan.gb, d.bias[1], scale)
  else
    dnnl.run(plan, ptr(input), ptr(gradOutput), plan.gw)
  end
  accumulate(gradWeight._dt, ptr(gradWeight), 1, plan.gw, plan.nw, scale)
  return true
end

------------------------------------------------------------------------------------------------
-- 2D pooling (nn/util/pool.lua's geometry g) of Float data.
-- Max pooling forward: oneDNN's output, and torch7's indices from its workspace, which holds
-- each window's arg-max tap (i * kW + j, in the output's layout): index = the window's first
-- input offset + the tap's offset + 1. Windows keep their first maximum, as torch7's loops do.
-- Its backward stays with nn_pool.lua's scatter loops, which read the indices (as torch7's):
-- oneDNN's, from a workspace kept per indices tensor and checked against a copy of them, was
-- slower on every shape measured (docs/performance.md: LeNet's first pooling 1.6 -> 2.7 ms on
-- one thread, 1.6 -> 2.0 on two; ResNet's 3.3 -> 5.4 and 3.6).

local function poolFwdPd(d, alg, prop)
  return dnnl.pd('dnnl_pooling_forward_primitive_desc_create', 'pooling', prop or dnnl.FORWARD_TRAINING,
    alg, dnnl.md(d.src), dnnl.md(d.dst), d.strides, d.kernel, d.dilates, d.padL, d.padR, nil)
end

local function poolBwdPd(d, alg)
  local fwd = poolFwdPd(d, alg)
  return fwd and dnnl.pd('dnnl_pooling_backward_primitive_desc_create', 'pooling backward', alg,
    dnnl.md(d.src), dnnl.md(d.dst), d.strides, d.kernel, d.dilates, d.padL, d.padR, fwd, nil)
end

makers.maxPool = function(d)
  local pd = poolFwdPd(d, dnnl.POOLING_MAX)
  if not pd then return nil end
  local plan = dnnl.plan(pd, { { arg = ARG.SRC, sizes = d.src }, { arg = ARG.DST, sizes = d.dst, out = true },
    { arg = ARG.WORKSPACE, out = true } })
  local n = d.dst[1] * d.dst[2] * d.dst[3] * d.dst[4]
  local tap = plan.bytes[3] == n and 'uint8_t' or plan.bytes[3] == 4 * n and 'int32_t'
  if not tap then return nil end   -- a workspace of another layout
  plan.taps, plan.tap = ffi.new(tap .. '[?]', n), tap
  return plan
end

makers.avgPool = function(d)
  local pd = poolFwdPd(d, d.alg, dnnl.FORWARD_INFERENCE)
  return pd and dnnl.plan(pd, { { arg = ARG.SRC, sizes = d.src }, { arg = ARG.DST, sizes = d.dst, out = true } })
end

makers.avgPoolBackward = function(d)
  local pd = poolBwdPd(d, d.alg)
  return pd and dnnl.plan(pd, { { arg = ARG.DIFF_DST, sizes = d.dst }, { arg = ARG.DIFF_SRC, sizes = d.src, out = true } })
end

-- g's oneDNN description (cached in g), nil where oneDNN does not serve it (not Float, not 2D);
-- padR: the padding after the last window (0 where it leaves rows unread), and whether any
-- window reaches past the padding (ceil mode)
local function poolDescription(g, dt)
  local I, O, p = g.I, g.O, g.p
  if not (dnnl.available and dnnl.enabled) or dt.name ~= 'Float' or I[1] ~= 1 or p.k[1] ~= 1 then return nil end
  if g.dnnlPool ~= nil then return g.dnnlPool or nil end
  local k, st, pad, dil = p.k, p.d, p.pad, p.dil
  local padR, past = {}, false
  for i = 2, 3 do
    padR[i - 1] = math.max(0, (O[i] - 1) * st[i] + (k[i] - 1) * dil[i] + 1 - I[i] - pad[i])
    past = past or padR[i - 1] > pad[i]
  end
  g.dnnlPool = { key = table.concat({ g.B, g.C, I[2], I[3], O[2], O[3], k[2], k[3], st[2], st[3], pad[2], pad[3],
      dil[2], dil[3] }, ' '),
    src = { g.B, g.C, I[2], I[3] }, dst = { g.B, g.C, O[2], O[3] }, strides = dnnl.dims { st[2], st[3] },
    kernel = dnnl.dims { k[2], k[3] }, dilates = dnnl.dims { dil[2] - 1, dil[3] - 1 },
    padL = dnnl.dims { pad[2], pad[3] }, padR = dnnl.dims(padR), past = past,
    dilated = dil[2] > 1 or dil[3] > 1 }
  return g.dnnlPool
end

-- the 1-based plane offsets of planes [lo, hi)'s windows' arg-max taps (offsets: each tap's
-- offset in the plane + 1); a window whose maximum oneDNN gives as the lowest float (its
-- starting value) takes its arg-max's value instead, so a window of -inf gives -inf, as torch7.
-- Planes are independent: chunks of them run on threads (parallel.lua).
local indicesLoop = [==[
local LOWEST = -3.4028234663852886e38
return function(lo, hi, ix, taps, out, input, offsets, H, W, oH, oW, sH, sW, pH, pW)
  local plane, oplane = H * W, oH * oW
  for p = lo, hi - 1 do
    local base, q = p * plane - 1, p * oplane
    for oy = 0, oH - 1 do
      local row = (oy * sH - pH) * W - pW
      for ox = 0, oW - 1 do
        local at = row + ox * sW + offsets[taps[q + ox]]
        ix[q + ox] = at
        if out[q + ox] == LOWEST then out[q + ox] = input[base + at] end
      end
      q = q + oW
    end
  end
end]==]
local numbers = { 'number', 'number', 'number', 'number', 'number', 'number', 'number', 'number' }
local indicesLoops = {}
for _, tap in ipairs { 'uint8_t', 'int32_t' } do
  indicesLoops[tap] = parallel.loop('max pooling indices (' .. tap .. ' taps)', indicesLoop,
    { 'int64_t *', tap .. ' *', 'float *', 'float *', 'double *', unpack(numbers) })
end
-- outputs a thread must have (about 30 us of the loop)
convdnnl.INDICES_LEAST = 16384

local function indicesOf(ix, plan, out, input, g)
  local H, W, oH, oW = g.I[2], g.I[3], g.O[2], g.O[3]
  local kH, kW = g.p.k[2], g.p.k[3]
  local offsets = plan.offsets
  if not offsets then   -- (doubles: no int64 arithmetic in the loop)
    local lH, lW = g.p.dil[2], g.p.dil[3]
    offsets = ffi.new('double[?]', kH * kW)
    for i = 0, kH - 1 do
      for j = 0, kW - 1 do offsets[i * kW + j] = i * lH * W + j * lW + 1 end
    end
    plan.offsets = offsets
  end
  local n = parallel.threads(g.P * oH * oW, convdnnl.INDICES_LEAST)
  indicesLoops[plan.tap][dtype.Float](math.min(n, g.P), g.P, ix, plan.taps, out, input, offsets, H, W, oH, oW,
    g.p.d[2], g.p.d[3], g.p.pad[2], g.p.pad[3])
end

-- output, indices = max pooling of input (2D, Float); false when oneDNN does not serve it
function convdnnl.maxPool(g, output, indices, input)
  local d = poolDescription(g, input._dt)
  local plan = d and planFor('maxPool', d)
  if not plan then return false end
  dnnl.run(plan, ptr(input), ptr(output), plan.taps)
  indicesOf(ptr(indices), plan, ptr(output), ptr(input), g)
  return true
end

-- Average pooling: torch7's divisor is oneDNN's exclude-padding one without countPad, and its
-- include-padding one (the kernel's size) while no window reaches past the padding; windows
-- that do (ceil mode), dilation and divide = false stay with the loops.
local function avgDescription(g, dt, countPad, divide)
  local d = divide and convdnnl.pooling.average and poolDescription(g, dt)
  if not d or d.dilated or countPad and d.past then return nil end
  d.alg = countPad and POOLING_AVG_INCLUDE_PADDING or POOLING_AVG_EXCLUDE_PADDING
  d.avgKey = d.key .. (countPad and ' include' or ' exclude')
  return d
end

local function avgPlan(pass, d)
  return planFor(pass, { key = d.avgKey, src = d.src, dst = d.dst, strides = d.strides, kernel = d.kernel,
    dilates = d.dilates, padL = d.padL, padR = d.padR, alg = d.alg })
end

-- to = pass ('avgPool': output from input, 'avgPoolBackward': gradInput from gradOutput)
local function average(pass, g, to, from, countPad, divide)
  local d = avgDescription(g, to._dt, countPad, divide)
  local plan = d and avgPlan(pass, d)
  if not plan then return false end
  dnnl.run(plan, ptr(from), ptr(to))
  return true
end

function convdnnl.avgPool(g, output, input, countPad, divide)
  return average('avgPool', g, output, input, countPad, divide)
end

function convdnnl.avgPoolBackward(g, gradInput, gradOutput, countPad, divide)
  return average('avgPoolBackward', g, gradInput, gradOutput, countPad, divide)
end

------------------------------------------------------------------------------------------------
-- Batch normalization over contiguous B x C x N Float data (nn_batchnorm.lua's layout and
-- state s). Training takes the batch's mean and biased variance from oneDNN and keeps torch7's
-- save_mean, save_std (1 / sqrt(var + eps)) and running statistics (unbiased variance) itself;
-- the backward pass gets the variance back from save_std. eps = 0 stays with the loops (a
-- constant feature then normalizes to 0 there, as torch7).

local function bnFlags(d) return (d.affine and dnnl.USE_SCALE + dnnl.USE_SHIFT or 0) + (d.train and 0 or dnnl.USE_GLOBAL_STATS) end

local function bnForwardPd(d)
  local md = dnnl.md(d.x)
  return dnnl.pd('dnnl_batch_normalization_forward_primitive_desc_create', 'batch normalization forward',
    d.train and dnnl.FORWARD_TRAINING or dnnl.FORWARD_INFERENCE, md, md, d.eps, bnFlags(d), nil)
end

-- the per-feature arguments of a batch normalization pass (inputs unless `out`)
local function features(specs, d, out, ...)
  for _, arg in ipairs { ... } do specs[#specs + 1] = { arg = arg, sizes = { d.x[2] }, out = out } end
  return specs
end

makers.bnForward = function(d)
  local pd = bnForwardPd(d)
  if not pd then return nil end
  local specs = { { arg = ARG.SRC, sizes = d.x }, { arg = ARG.DST, sizes = d.x, out = true } }
  features(specs, d, d.train, ARG.MEAN, ARG.VARIANCE)
  if d.affine then features(specs, d, false, ARG.SCALE, ARG.SHIFT) end
  return dnnl.plan(pd, specs)
end

makers.bnBackward = function(d)
  local fwd = bnForwardPd(d)
  local md = dnnl.md(d.x)
  local pd = fwd and dnnl.pd('dnnl_batch_normalization_backward_primitive_desc_create',
    'batch normalization backward', d.affine and dnnl.BACKWARD or dnnl.BACKWARD_DATA, md, md, md,
    d.eps, bnFlags(d), fwd, nil)
  if not pd then return nil end
  local specs = { { arg = ARG.SRC, sizes = d.x }, { arg = ARG.DIFF_DST, sizes = d.x },
    { arg = ARG.DIFF_SRC, sizes = d.x, out = true } }
  features(specs, d, false, ARG.MEAN, ARG.VARIANCE)
  if d.affine then
    features(specs, d, false, ARG.SCALE)
    features(specs, d, true, ARG.DIFF_SCALE, ARG.DIFF_SHIFT)
  end
  return dnnl.plan(pd, specs)
end

-- The per-feature buffers of a batch normalization: C floats each, made once per C.
local bnBuffers = setmetatable({}, { __mode = 'v' })
local function floats(C)
  local b = bnBuffers[C]
  if not b then
    b = { mean = ffi.new('float[?]', C), var = ffi.new('float[?]', C), dscale = ffi.new('float[?]', C),
      dshift = ffi.new('float[?]', C), scale = ffi.new('float[?]', C), shift = ffi.new('float[?]', C) }
    bnBuffers[C] = b
  end
  return b
end

-- a 1-D tensor's values into buf (floats)
local function gather(buf, t, n)
  local p, s = ptr(t), t._str[1]
  for i = 0, n - 1 do buf[i] = p[i * s] end
end

local function bnDescription(x, B, C, N, s)
  if not (dnnl.available and dnnl.enabled) or x._dt.name ~= 'Float' or s.eps <= 0 then return nil end
  return { key = ('%d %d %d %s %s %.9g'):format(B, C, N, tostring(s.train), tostring(s.weight ~= nil), s.eps),
    x = { B, C, N }, train = s.train, affine = s.weight ~= nil, eps = s.eps }
end

-- out = the normalized x; false when oneDNN does not serve it (nothing written). On one
-- thread the loops of nn_batchnorm.lua are faster (1.3x at ResNet's sizes) and run instead.
function convdnnl.bnForward(x, out, B, C, N, s)
  local d = bnDescription(x, B, C, N, s)
  if d and convdnnl.threads() < 2 then return false end
  local plan = d and planFor('bnForward', d)
  if not plan then return false end
  local f = floats(C)
  if not d.train then gather(f.mean, s.running_mean, C); gather(f.var, s.running_var, C) end
  if d.affine then
    gather(f.scale, s.weight, C); gather(f.shift, s.bias, C)
    dnnl.run(plan, ptr(x), ptr(out), f.mean, f.var, f.scale, f.shift)
  else
    dnnl.run(plan, ptr(x), ptr(out), f.mean, f.var)
  end
  if d.train then
    local rm, rms, rv, rvs = ptr(s.running_mean), s.running_mean._str[1], ptr(s.running_var), s.running_var._str[1]
    local sm, ss, m, n = ptr(s.save_mean), ptr(s.save_std), s.momentum, B * N
    for c = 0, C - 1 do
      local mean, var = f.mean[c], f.var[c]
      sm[c], ss[c] = mean, 1 / math.sqrt(var + s.eps)
      rm[c * rms] = m * mean + (1 - m) * rm[c * rms]
      rv[c * rvs] = m * var * n / (n - 1) + (1 - m) * rv[c * rvs]
    end
  end
  return true
end

-- gradInput = the input gradient, gradWeight, gradBias (when given) += scale * theirs; false
-- when oneDNN does not serve it
function convdnnl.bnBackward(x, gradOutput, gradInput, B, C, N, s, gradWeight, gradBias, scale)
  local d = bnDescription(x, B, C, N, s)
  local plan = d and gradInput and planFor('bnBackward', d)
  if not plan then return false end
  local f = floats(C)
  if d.train then
    local sm, ss = ptr(s.save_mean), ptr(s.save_std)
    for c = 0, C - 1 do f.mean[c], f.var[c] = sm[c], 1 / (ss[c] * ss[c]) - s.eps end
  else
    gather(f.mean, s.running_mean, C); gather(f.var, s.running_var, C)
  end
  if not d.affine then
    dnnl.run(plan, ptr(x), ptr(gradOutput), ptr(gradInput), f.mean, f.var)
    return true
  end
  gather(f.scale, s.weight, C)
  dnnl.run(plan, ptr(x), ptr(gradOutput), ptr(gradInput), f.mean, f.var, f.scale, f.dscale, f.dshift)
  if gradWeight then accumulate(gradWeight._dt, ptr(gradWeight), gradWeight._str[1], f.dscale, C, scale) end
  if gradBias then accumulate(gradBias._dt, ptr(gradBias), gradBias._str[1], f.dshift, C, scale) end
  return true
end

return convdnnl
