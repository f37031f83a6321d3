-- The convolution passes on oneDNN (torch.backend.cpu.dnnl), for Float tensors where the
-- library is installed: the path PyTorch's CPU convolutions take, on all torch.setnumthreads
-- threads. The plain NCHW tensors are reordered into the blocked layouts oneDNN picks and
-- back (as PyTorch does); weights too, on each call (they change with every update).
--
-- A plan (primitive, reorders, their buffers) is made once per geometry, pass and thread
-- count, and shared by the modules of that geometry; at most MAX_PLANS are kept.
--
-- SpatialFullConvolution is the same arithmetic with the roles swapped: its forward is a
-- convolution's backward-data pass, its backward a convolution's forward, its weight gradient
-- the backward-weights pass with input and gradOutput exchanged.
local ffi = require 'ffi'
local dnnl = require 'torch.backend.cpu.dnnl'
local apply = require 'torch.backend.cpu.apply'

local convdnnl = {}
local ptr = apply.ptr
local ARG, QUERY = dnnl.ARG, dnnl.QUERY
local MAX_PLANS = 64

local plans, count = {}, 0

-- The oneDNN description of a convolution of image (B x C x H x W) with kernel
-- (O x C x kH x kW) to the output (B x O x oH x oW): nil when oneDNN cannot run it (another
-- element type, or a geometry whose last windows leave input rows or columns unread).
local function describe(g, dt)
  if dt.name ~= 'Float' or g.T or g.kT then return nil end
  local lH, lW = g.dilationH or 1, g.dilationW or 1
  local padBottom = (g.oH - 1) * g.dH + (g.kH - 1) * lH + 1 - g.H - g.padH
  local padRight = (g.oW - 1) * g.dW + (g.kW - 1) * lW + 1 - g.W - g.padW
  if padBottom < 0 or padRight < 0 then return nil end
  return {
    key = table.concat({ g.B, g.C, g.H, g.W, g.O, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW, lH, lW }, ' '),
    src = { g.B, g.C, g.H, g.W }, weights = { g.O, g.C, g.kH, g.kW }, dst = { g.B, g.O, g.oH, g.oW },
    bias = { g.O }, strides = dnnl.dims { g.dH, g.dW }, dilates = dnnl.dims { lH - 1, lW - 1 },
    padL = dnnl.dims { g.padH, g.padW }, padR = dnnl.dims { padBottom, padRight },
  }
end

-- The forward primitive descriptor (also the hint of the backward ones).
local function forwardPd(d, bias)
  return dnnl.pd('dnnl_convolution_forward_primitive_desc_create', 'convolution forward',
    dnnl.FORWARD_TRAINING, dnnl.CONVOLUTION_DIRECT, dnnl.md(d.src, true), dnnl.md(d.weights, true),
    bias and dnnl.md(d.bias) or nil, dnnl.md(d.dst, true), d.strides, d.dilates, d.padL, d.padR, nil)
end

local makers = {
  forward = function(d, withBias)
    local fwd = forwardPd(d, withBias)
    return fwd and dnnl.plan(fwd, { { arg = ARG.SRC, query = QUERY.SRC, sizes = d.src },
      { arg = ARG.WEIGHTS, query = QUERY.WEIGHTS, sizes = d.weights },
      { arg = ARG.DST, query = QUERY.DST, sizes = d.dst, out = true },
      withBias and { arg = ARG.BIAS, query = QUERY.WEIGHTS, index = 1, sizes = d.bias } or nil })
  end,
  backward = function(d)
    local fwd = forwardPd(d, false)
    local pd = fwd and dnnl.pd('dnnl_convolution_backward_data_primitive_desc_create',
      'convolution backward data', dnnl.CONVOLUTION_DIRECT, dnnl.md(d.src, true),
      dnnl.md(d.weights, true), dnnl.md(d.dst, true), d.strides, d.dilates, d.padL, d.padR, fwd, nil)
    return pd and dnnl.plan(pd, { { arg = ARG.DIFF_DST, query = QUERY.DIFF_DST, sizes = d.dst },
      { arg = ARG.WEIGHTS, query = QUERY.WEIGHTS, sizes = d.weights },
      { arg = ARG.DIFF_SRC, query = QUERY.DIFF_SRC, sizes = d.src, out = true } })
  end,
  -- the weight gradient (and the bias's, the sums of gradOutput's planes) into plain buffers
  accGrad = function(d, withBias)
    local fwd = forwardPd(d, withBias)
    local pd = fwd and dnnl.pd('dnnl_convolution_backward_weights_primitive_desc_create',
      'convolution backward weights', dnnl.CONVOLUTION_DIRECT, dnnl.md(d.src, true),
      dnnl.md(d.weights, true), withBias and dnnl.md(d.bias) or nil, dnnl.md(d.dst, true),
      d.strides, d.dilates, d.padL, d.padR, fwd, nil)
    local specs = { { arg = ARG.SRC, query = QUERY.SRC, sizes = d.src },
      { arg = ARG.DIFF_DST, query = QUERY.DIFF_DST, sizes = d.dst },
      { arg = ARG.DIFF_WEIGHTS, query = QUERY.DIFF_WEIGHTS, sizes = d.weights, out = true } }
    if withBias then
      specs[4] = { arg = ARG.DIFF_BIAS, query = QUERY.DIFF_WEIGHTS, index = 1, sizes = d.bias, out = true }
    end
    if not pd then return nil end
    local plan = dnnl.plan(pd, specs)
    local n = d.weights[1] * d.weights[2] * d.weights[3] * d.weights[4]
    plan.gw, plan.gb = ffi.new('float[?]', n), withBias and ffi.new('float[?]', d.bias[1]) or nil
    plan.nw = n
    return plan
  end,
}

-- The plan of `pass` for description d (nil when oneDNN refuses the geometry: the caller's
-- kernels run it then).
local function planFor(pass, d, withBias)
  local key = ('%s %s %s %d'):format(pass, d.key, tostring(withBias), dnnl.threads())
  local p = plans[key]
  if p == nil then
    if count >= MAX_PLANS then plans, count = {}, 0 end
    p = makers[pass](d, withBias) or false
    plans[key], count = p, count + 1
  end
  return p or nil
end

-- The description of the 2D geometry g (kernels/conv.lua's), cached in g; nil when oneDNN is
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

local function accumulate(dst, stride, src, n, scale)
  for i = 0, n - 1 do dst[i * stride] = dst[i * stride] + scale * src[i] end
end

-- gradWeight += scale * dW, gradBias (when given) += scale * the sums of gradOutput's planes
function convdnnl.accGrad(d, input, gradOutput, gradWeight, gradBias, scale)
  local plan = planFor('accGrad', d, gradBias ~= nil)
  if not plan then return false end
  if gradBias then
    dnnl.run(plan, ptr(input), ptr(gradOutput), plan.gw, plan.gb)
    accumulate(ptr(gradBias), gradBias._str[1], plan.gb, d.bias[1], scale)
  else
    dnnl.run(plan, ptr(input), ptr(gradOutput), plan.gw)
  end
  accumulate(ptr(gradWeight), 1, plan.gw, plan.nw, scale)
  return true
end

return convdnnl
