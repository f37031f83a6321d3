-- Batch normalization over contiguous B x C x N data (feature c in dim 2, N elements per
-- feature and batch item), as torch7's THNN kernel: batch statistics in training (biased
-- variance to normalize, unbiased for the running average), running statistics otherwise.
-- Per-feature vectors are (pointer, offset, stride) triples; nil pointers mean absent.
-- Float data runs on oneDNN where it is installed (dnnl_nn.lua), on all threads.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local convdnnl = require 'torch.backend.cpu.dnnl_nn'

local batchnorm = {}

local forwardLoops = apply.perType('batchnorm forward', [[
local sqrt = math.sqrt
return function(ip, io, op, oo, B, C, N, train, momentum, eps,
                rm, rmo, rms, rv, rvo, rvs, sm, smo, ss, sso, w, wo, ws, b, bo, bs)
  local n = B * N
  for c = 0, C - 1 do
    local mean, invstd
    if train then
      local s = 0
      for k = 0, B - 1 do
        local o = io + (k * C + c) * N
        for i = 0, N - 1 do s = s + ip[o + i] end
      end
      mean = s / n
      local v = 0
      for k = 0, B - 1 do
        local o = io + (k * C + c) * N
        for i = 0, N - 1 do local d = ip[o + i] - mean; v = v + d * d end
      end
      invstd = (v == 0 and eps == 0) and 0 or 1 / sqrt(v / n + eps)
      sm[smo + c], ss[sso + c] = mean, invstd
      rm[rmo + c * rms] = momentum * mean + (1 - momentum) * rm[rmo + c * rms]
      rv[rvo + c * rvs] = momentum * v / (n - 1) + (1 - momentum) * rv[rvo + c * rvs]
    else
      mean = rm[rmo + c * rms]
      invstd = 1 / sqrt(rv[rvo + c * rvs] + eps)
    end
    local wc, bc = 1, 0
    if w then wc = w[wo + c * ws] end
    if b then bc = b[bo + c * bs] end
    for k = 0, B - 1 do
      local o, q = io + (k * C + c) * N, oo + (k * C + c) * N
      for i = 0, N - 1 do op[q + i] = (ip[o + i] - mean) * invstd * wc + bc end
    end
  end
end]])

local backwardLoops = apply.perType('batchnorm backward', [[
local sqrt = math.sqrt
return function(ip, io, gp, go, gip, gio, B, C, N, train, eps, scale,
                rm, rmo, rms, rv, rvo, rvs, sm, smo, ss, sso, w, wo, ws, gw, gwo, gws, gb, gbo, gbs)
  local n = B * N
  for c = 0, C - 1 do
    local mean, invstd
    if train then mean, invstd = sm[smo + c], ss[sso + c]
    else mean, invstd = rm[rmo + c * rms], 1 / sqrt(rv[rvo + c * rvs] + eps) end
    local wc = 1
    if w then wc = w[wo + c * ws] end
    local s, dot = 0, 0
    for k = 0, B - 1 do
      local o, q = io + (k * C + c) * N, go + (k * C + c) * N
      for i = 0, N - 1 do
        local g = gp[q + i]
        s = s + g
        dot = dot + (ip[o + i] - mean) * g
      end
    end
    if gip then
      local kk, gmean, f = 0, 0, invstd * wc
      if train then kk, gmean = dot * invstd * invstd / n, s / n end
      for k = 0, B - 1 do
        local o, q, r = io + (k * C + c) * N, go + (k * C + c) * N, gio + (k * C + c) * N
        for i = 0, N - 1 do gip[r + i] = (gp[q + i] - gmean - (ip[o + i] - mean) * kk) * f end
      end
    end
    if gw then gw[gwo + c * gws] = gw[gwo + c * gws] + scale * dot * invstd end
    if gb then gb[gbo + c * gbs] = gb[gbo + c * gbs] + scale * s end
  end
end]])

local function vec(t)
  if not t then return nil, 0, 0 end
  return t._st._ptr, t._off, t._str[1]
end

-- out = normalized x (B x C x N, contiguous); s: { running_mean, running_var, save_mean,
-- save_std, weight, bias, train, momentum, eps }
function batchnorm.forward(x, out, B, C, N, s)
  if convdnnl.bnForward(x, out, B, C, N, s) then return end
  local rm, rmo, rms = vec(s.running_mean)
  local rv, rvo, rvs = vec(s.running_var)
  local sm, smo = vec(s.save_mean)
  local ss, sso = vec(s.save_std)
  local w, wo, ws = vec(s.weight)
  local b, bo, bs = vec(s.bias)
  forwardLoops[x._dt](x._st._ptr, x._off, out._st._ptr, out._off, B, C, N, s.train, s.momentum,
    s.eps, rm, rmo, rms, rv, rvo, rvs, sm, smo, ss, sso, w, wo, ws, b, bo, bs)
end

-- gradInput (when given) = the input gradient; gradWeight, gradBias (when given) += scale *
-- theirs
function batchnorm.backward(x, gradOutput, gradInput, B, C, N, s, gradWeight, gradBias, scale)
  if convdnnl.bnBackward(x, gradOutput, gradInput, B, C, N, s, gradWeight, gradBias, scale) then return end
  local rm, rmo, rms = vec(s.running_mean)
  local rv, rvo, rvs = vec(s.running_var)
  local sm, smo = vec(s.save_mean)
  local ss, sso = vec(s.save_std)
  local w, wo, ws = vec(s.weight)
  local gw, gwo, gws = vec(gradWeight)
  local gb, gbo, gbs = vec(gradBias)
  local gi, gio = vec(gradInput)
  backwardLoops[x._dt](x._st._ptr, x._off, gradOutput._st._ptr, gradOutput._off, gi, gio,
    B, C, N, s.train, s.eps, scale, rm, rmo, rms, rv, rvo, rvs, sm, smo, ss, sso, w, wo, ws,
    gw, gwo, gws, gb, gbo, gbs)
end

-- The op table's passes on the CPU (the CUDA ones: backend/cuda/nn_batchnorm.lua): self is the
-- module (its kernelState), x, g, out, gi contiguous B x C x N views.
backend.register('cpu', {
  batchnorm_forward = function(self, x, out)
    local sz = x._sz
    batchnorm.forward(x, out, sz[1], sz[2], sz[3], self:kernelState(x))
  end,
  batchnorm_backward = function(self, x, g, gi, gw, gb, scale)
    local sz = x._sz
    batchnorm.backward(x, g, gi, sz[1], sz[2], sz[3], self:kernelState(x), gw, gb, scale)
  end,
})

return batchnorm
