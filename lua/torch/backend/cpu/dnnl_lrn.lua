-- SpatialCrossMapLRN's passes on oneDNN (torch.backend.cpu.dnnl), for contiguous B x C x N Float
-- data (backend/cpu/nn_lrn.lua's layout) of an odd window `size`: oneDNN's window is
-- [c - (size-1)/2, c + (size-1)/2], torch7's [c - pre, c + post] (pre = floor((size-1)/2),
-- post = size-1-pre): the same for odd sizes only. Both divide alpha by size.
--
-- The forward writes torch7's public field scale (k + alpha/size * the window's sum of squares)
-- as well as the output: squares (eltwise), their window means (average pooling over the
-- channels, padding counted: sum / size), then alpha * mean + k (eltwise
-- linear); the output is oneDNN's LRN, whose workspace is kept per scale tensor (weakly) for the
-- backward pass, which then runs oneDNN's LRN backward (as torch7's, it assumes the input of the
-- last forward; without a workspace of this geometry nn_lrn.lua's loops run from scale and output).
local ffi = require 'ffi'
local dnnl = require 'torch.backend.cpu.dnnl'
local convdnnl = require 'torch.backend.cpu.dnnl_nn'
local ptr = require('torch.backend.cpu.apply').ptr
require 'torch.backend.cpu.dnnl_eltwise'   -- declares the eltwise primitive's functions

ffi.cdef [[
dnnl_status_t dnnl_lrn_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int prop_kind, int alg_kind, const dnnl_memory_desc_t src,
  const dnnl_memory_desc_t dst, int64_t local_size, float alpha, float beta, float k,
  const dnnl_primitive_attr_t attr);
dnnl_status_t dnnl_lrn_backward_primitive_desc_create(dnnl_primitive_desc_t *pd,
  dnnl_engine_t engine, int alg_kind, const dnnl_memory_desc_t diff_src,
  const dnnl_memory_desc_t diff_dst, const dnnl_memory_desc_t src, int64_t local_size, float alpha,
  float beta, float k, const dnnl_primitive_desc_t hint_fwd_pd, const dnnl_primitive_attr_t attr);
]]

-- dnnl_types.h's (v3.2) values
local LRN_ACROSS_CHANNELS, ELTWISE_SQUARE, ELTWISE_LINEAR = 0xaff, 0x23, 0x26
local POOLING_AVG_INCLUDE_PADDING = 0x2ff
local ARG = dnnl.ARG

local lrn = {}
local MAX_PLANS = 32
local plans, count = {}, 0

-- the primitives' layout of the B x C x N x 1 data: channels-last (oneDNN's LRN has no fast
-- backward kernel for the plain one: 256 ms against its 21 here, and 83 for the loops, at
-- AlexNet's 96 x 55 x 55, batch 16)
local function lrnMd(d)
  local C, H, W = d.x[2], d.x[3], d.x[4]
  return dnnl.md(d.x, false, { C * H * W, 1, W * C, C })
end

local function lrnForwardPd(d)
  local md = lrnMd(d)
  return dnnl.pd('dnnl_lrn_forward_primitive_desc_create', 'lrn forward', dnnl.FORWARD_TRAINING,
    LRN_ACROSS_CHANNELS, md, md, d.size, d.alpha, d.beta, d.k, nil)
end

local function eltwisePlan(n, alg, alpha, beta)
  local md = dnnl.md({ n })
  local pd = dnnl.pd('dnnl_eltwise_forward_primitive_desc_create', 'eltwise', dnnl.FORWARD_INFERENCE,
    alg, md, md, alpha, beta, nil)
  return pd and dnnl.plan(pd, { { arg = ARG.SRC, sizes = { n } }, { arg = ARG.DST, sizes = { n }, out = true } })
end

local makers = {
  forward = function(d)
    local n = d.x[1] * d.x[2] * d.x[3] * d.x[4]
    local pd = lrnForwardPd(d)
    local square, linear = eltwisePlan(n, ELTWISE_SQUARE, 0, 0), eltwisePlan(n, ELTWISE_LINEAR, d.alpha, d.k)
    -- the B x C x N data as B images of N channels (stride 1), C rows (stride N) and 1 column:
    -- a channels-last layout, which oneDNN's fast pooling kernels take
    local B, C, N = d.x[1], d.x[2], d.x[3] * d.x[4]
    local img, strides = { B, N, C, 1 }, { C * N, 1, N, N }
    local pool = dnnl.pd('dnnl_pooling_forward_primitive_desc_create', 'lrn window sums',
      dnnl.FORWARD_INFERENCE, POOLING_AVG_INCLUDE_PADDING, dnnl.md(img, false, strides),
      dnnl.md(img, false, strides),
      dnnl.dims { 1, 1 }, dnnl.dims { d.size, 1 }, dnnl.dims { 0, 0 }, dnnl.dims { d.pre, 0 },
      dnnl.dims { d.size - 1 - d.pre, 0 }, nil)
    if not (pd and square and linear and pool) then return nil end
    local plan = dnnl.plan(pd, { { arg = ARG.SRC, sizes = d.x }, { arg = ARG.DST, sizes = d.x, out = true },
      { arg = ARG.WORKSPACE, out = true } })
    plan.square, plan.linear = square, linear
    plan.pool = dnnl.plan(pool, { { arg = ARG.SRC }, { arg = ARG.DST, out = true } })
    plan.squares = ffi.new('float[?]', n)
    return plan
  end,
  backward = function(d)
    local fwd = lrnForwardPd(d)
    local md = lrnMd(d)
    local pd = fwd and dnnl.pd('dnnl_lrn_backward_primitive_desc_create', 'lrn backward',
      LRN_ACROSS_CHANNELS, md, md, md, d.size, d.alpha, d.beta, d.k, fwd, nil)
    return pd and dnnl.plan(pd, { { arg = ARG.SRC, sizes = d.x }, { arg = ARG.DIFF_DST, sizes = d.x },
      { arg = ARG.WORKSPACE }, { arg = ARG.DIFF_SRC, sizes = d.x, out = true } })
  end,
}

local function planFor(pass, d)
  local threads = convdnnl.threads()
  local key = pass .. ' ' .. d.key .. ' ' .. threads
  local p = plans[key]
  if p == nil then
    if count >= MAX_PLANS then plans, count = {}, 0 end
    p = makers[pass](d) or false
    if p then
      p.threads = threads
      for _, sub in ipairs { 'square', 'linear', 'pool' } do
        if p[sub] then p[sub].threads = threads end
      end
    end
    plans[key], count = p, count + 1
  end
  return p or nil
end

local function describe(x, B, C, N, size, alpha, beta, k)
  if not (dnnl.available and dnnl.enabled and lrn.enabled) or x._dt.name ~= 'Float' or size % 2 == 0 then return nil end
  -- the N elements of a plane as H x W (any factors serve the channel windows: the squarest,
  -- where oneDNN's reorders are fastest)
  local H = math.floor(math.sqrt(N))
  while N % H ~= 0 do H = H - 1 end
  return { key = ('%d %d %d %d %.9g %.9g %.9g'):format(B, C, N, size, alpha, beta, k), x = { B, C, H, N / H },
    size = size, alpha = alpha, beta = beta, k = k, pre = (size - 1) / 2 }
end

-- whether these passes run (false: nn_lrn.lua's loops; tests compare both)
lrn.enabled = true

-- per scale tensor (weakly): the workspace of its last forward and that forward's key
local kept = setmetatable({}, { __mode = 'k' })

-- scale, out = torch7's scale and output of x; false when oneDNN does not serve it
function lrn.forward(x, scale, out, B, C, N, size, alpha, beta, k)
  local d = describe(x, B, C, N, size, alpha, beta, k)
  local plan = d and planFor('forward', d)
  if not plan then return false end
  local ws = kept[scale]
  if not (ws and ws.key == d.key) then
    ws = { key = d.key, k = k, buf = ffi.new('uint8_t[?]', plan.bytes[3]), bytes = plan.bytes[3] }
    kept[scale] = ws
  end
  local xp, sp = ptr(x), ptr(scale)
  dnnl.run(plan, xp, ptr(out), ws.buf)
  dnnl.run(plan.square, xp, plan.squares)
  dnnl.run(plan.pool, plan.squares, sp)
  dnnl.run(plan.linear, sp, sp)
  return true
end

-- gi = the input gradient, from the workspace of the last forward of this scale tensor; false
-- when there is none of this geometry
function lrn.backward(x, g, scale, gi, B, C, N, size, alpha, beta)
  local ws = kept[scale]
  local d = ws and describe(x, B, C, N, size, alpha, beta, ws.k)
  if not (d and d.key == ws.key) then return false end
  local plan = planFor('backward', d)
  -- (a backward kernel may need no workspace: 0 bytes)
  if not (plan and (plan.bytes[3] == ws.bytes or plan.bytes[3] == 0)) then return false end
  dnnl.run(plan, ptr(x), ptr(g), ws.buf, ptr(gi))
  return true
end

return lrn
