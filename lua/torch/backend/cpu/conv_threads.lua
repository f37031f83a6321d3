-- The im2col convolution passes (nn_conv.lua's forward and weight gradient) split over the
-- batch on several threads (parallel.lua's loops over images): for the convolutions whose
-- oneDNN kernels waste most of their work on padded channel blocks (LeNet's first layer, 1 -> 20
-- 5x5: the plain image in, 20 of 32 output channels used), where one thread of im2col +
-- GEMM beats oneDNN's kernel on one thread by 2x and two of oneDNN's threads only match it.
-- Each thread unfolds one image at a time into its own columns (in cache) and multiplies them
-- with oneDNN's dnnl_sgemm on one OpenMP thread (its address handed to the workers, as
-- gemm_async.lua does). Float only, dilation 1.
--
-- Forward: each image's output is its own product, the same arithmetic at any thread count.
-- Weight gradient: the batch is cut into GROUPS groups of images (a fixed count, whatever the
-- threads), each group's sum in a buffer of its own, then the groups' sums added in order:
-- the result does not depend on the thread count either (it differs from nn_conv.lua's
-- single running sum by rounding).
local ffi = require 'ffi'
local dnnl = require 'torch.backend.cpu.dnnl'
local parallel = require 'torch.backend.cpu.parallel'
local dtype = require 'torch.core.dtype'

local M = {}
M.GROUPS = 16
-- multiply-adds a thread must have (about 100 us)
M.LEAST = 2e6

pcall(ffi.cdef, [[int dnnl_sgemm(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
  const float *, int64_t, float, float *, int64_t);]])

-- col (K1 x N, row K of ones when K1 > K, set by the caller) = the patches of image b
-- (the function pointer types made once per compiled text: each ffi.cast of a function type
-- written out makes a new ctype, and LuaJIT's table of them is finite)
local im2col = [[
local ffi = require 'ffi'
local copy = ffi.copy
local gemmType = ffi.typeof('int (*)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t, float, float *, int64_t)')
local ompType = ffi.typeof('void (*)(int)')
local function im2col(col, img, base, C, H, W, kH, kW, dH, dW, padH, padW, oH, oW)
  local N = oH * oW
  local floor, max, min = math.floor, math.max, math.min
  for c = 0, C - 1 do
    local src = base + c * H * W
    for i = 0, kH - 1 do
      for j = 0, kW - 1 do
        local row = ((c * kH + i) * kW + j) * N
        -- the output columns whose tap is in the image: [x0, x1)
        local x0 = max(0, floor((padW - j + dW - 1) / dW))
        local x1 = min(oW, floor((W - 1 + padW - j) / dW) + 1)
        if x1 < x0 then x1 = x0 end
        for y = 0, oH - 1 do
          local iy = y * dH + i - padH
          local r = row + y * oW
          if iy < 0 or iy >= H then
            for x = 0, oW - 1 do col[r + x] = 0 end
          else
            local s = src + iy * W + j - padW
            for x = 0, x0 - 1 do col[r + x] = 0 end
            if dW == 1 then   -- a contiguous run in both
              if x1 > x0 then copy(col + (r + x0), img + (s + x0), (x1 - x0) * 4) end
            else
              for x = x0, x1 - 1 do col[r + x] = img[s + x * dW] end
            end
            for x = x1, oW - 1 do col[r + x] = 0 end
          end
        end
      end
    end
  end
end

-- a thread's columns (K1 x N; row K all ones when K1 > K), its product, one OpenMP thread
local function setup(K, K1, N, gemm, omp)
  local col = ffi.new('float[?]', K1 * N)
  for n = K * N, K1 * N - 1 do col[n] = 1 end
  ffi.cast(ompType, omp)(1)
  return col, ffi.cast(gemmType, gemm)
end
]]

local forwardSrc = im2col .. [[
return function(lo, hi, img, io, out, oo, w, gemm, omp, C, H, W, O, kH, kW, dH, dW, padH, padW, oH, oW, K1)
  local N, K = oH * oW, C * kH * kW
  local col, sgemm = setup(K, K1, N, gemm, omp)
  for b = lo, hi - 1 do
    im2col(col, img, io + b * C * H * W, C, H, W, kH, kW, dH, dW, padH, padW, oH, oW)
    local status = sgemm(78, 78, O, N, K1, 1, w, K1, col, N, 0, out + (oo + b * O * N), N)
    if status ~= 0 then error('convolution forward: dnnl_sgemm failed (status ' .. status .. ')') end
  end
end]]

-- group g's sum (O x K1, at sums + g * O * K1) = scale * sum over its images of gradOutput_b
-- (O x N) times their columns' transpose
local gradSrc = im2col .. [[
return function(lo, hi, img, io, go, goo, sums, gemm, omp, C, H, W, O, kH, kW, dH, dW, padH, padW, oH, oW, K1, B, groups, scale)
  local N, K = oH * oW, C * kH * kW
  local col, sgemm = setup(K, K1, N, gemm, omp)
  for g = lo, hi - 1 do
    local b0, b1 = math.floor(g * B / groups), math.floor((g + 1) * B / groups)
    for b = b0, b1 - 1 do
      im2col(col, img, io + b * C * H * W, C, H, W, kH, kW, dH, dW, padH, padW, oH, oW)
      local status = sgemm(78, 84, O, K1, N, scale, go + (goo + b * O * N), N, col, N, b == b0 and 0 or 1,
        sums + g * O * K1, K1)
      if status ~= 0 then error('convolution weight gradient: dnnl_sgemm failed (status ' .. status .. ')') end
    end
  end
end]]

local numbers = function(n)
  local s = {}
  for i = 1, n do s[i] = 'number' end
  return unpack(s)
end
local loops = {
  forward = parallel.loop('convolution forward on threads', forwardSrc,
    { 'float *', 'number', 'float *', 'number', 'float *', 'void *', 'void *', numbers(13) }),
  grad = parallel.loop('convolution weight gradient on threads', gradSrc,
    { 'float *', 'number', 'float *', 'number', 'float *', 'void *', 'void *', numbers(16) }),
}

local gomp, addresses
-- dnnl_sgemm's and omp_set_num_threads' addresses, or nil without oneDNN
local function entryPoints()
  if addresses == nil then
    addresses = false
    if dnnl.available and dnnl.lib then
      local ok = pcall(function()
        gomp = ffi.load('libgomp.so.1')
        addresses = { ffi.cast('void *', dnnl.lib.dnnl_sgemm), ffi.cast('void *', gomp.omp_set_num_threads) }
      end)
      if not ok then addresses = false end
    end
  end
  return addresses or nil
end

-- Whether g (nn_conv.lua's geometry) runs here, and on how many threads: a Float convolution
-- without dilation, parallel loops on, oneDNN loaded, work for 2 threads at least; nil otherwise.
function M.threads(g, dt)
  if dt.name ~= 'Float' or (g.dilationH or 1) ~= 1 or (g.dilationW or 1) ~= 1 or g.groups then return nil end
  if not parallel.enabled or not (dnnl.available and dnnl.enabled) or not entryPoints() then return nil end
  local n = parallel.threads(g.B * g.O * g.K * g.N, M.LEAST)
  return n >= 2 and n or nil
end

local function buffer(e, name, n)
  local b = e[name]
  if not b or b.n < n then b = { n = n, p = ffi.new('float[?]', n) }; e[name] = b end
  return b.p
end

local ptr = function(t) return t._st._ptr + t._off end

-- output (B x O x N) = weight (O x K) * the patches of input [+ bias] on `threads` threads
function M.forward(e, g, threads, input, weight, bias, output)
  local O, K = g.O, g.K
  local K1 = bias and K + 1 or K
  local wb = buffer(e, 'threadedWeight', O * K1)
  local w, bs = ptr(weight), bias and bias._str[1]
  local b = bias and ptr(bias)
  for o = 0, O - 1 do
    for k = 0, K - 1 do wb[o * K1 + k] = w[o * K + k] end
    if b then wb[o * K1 + K] = b[o * bs] end
  end
  local at = entryPoints()
  local saved = gomp.omp_get_max_threads()
  local ok, err = pcall(loops.forward[dtype.Float], math.min(threads, g.B), g.B, input._st._ptr, input._off,
    output._st._ptr, output._off, wb, at[1], at[2], g.C, g.H, g.W, O, g.kH, g.kW, g.dH, g.dW, g.padH, g.padW,
    g.oH, g.oW, K1)
  dnnl.setThreads(saved)
  if not ok then error(err, 0) end
end

-- gradWeight (O x K) += scale * sum_b gradOutput_b columns_b^T; gradBias (when not nil) +=
-- scale * the sums of gradOutput's planes; on `threads` threads
function M.accGrad(e, g, threads, input, gradOutput, gradWeight, gradBias, scale)
  local O, K, B = g.O, g.K, g.B
  if B == 0 then return end
  local K1 = gradBias and K + 1 or K
  local groups = math.min(M.GROUPS, B)
  local sums = buffer(e, 'threadedSums', groups * O * K1)
  local at = entryPoints()
  local saved = gomp.omp_get_max_threads()
  local ok, err = pcall(loops.grad[dtype.Float], math.min(threads, groups), groups, input._st._ptr, input._off,
    gradOutput._st._ptr, gradOutput._off, sums, at[1], at[2], g.C, g.H, g.W, O, g.kH, g.kW, g.dH, g.dW,
    g.padH, g.padW, g.oH, g.oW, K1, B, groups, scale)
  dnnl.setThreads(saved)
  if not ok then error(err, 0) end
  -- the groups' sums in order, then into the gradients
  local gw, n = ptr(gradWeight), O * K1
  for q = 1, groups - 1 do
    local s = sums + q * n
    for i = 0, n - 1 do sums[i] = sums[i] + s[i] end
  end
  for o = 0, O - 1 do
    for k = 0, K - 1 do gw[o * K + k] = gw[o * K + k] + sums[o * K1 + k] end
  end
  if gradBias then
    local gb, bs = ptr(gradBias), gradBias._str[1]
    for o = 0, O - 1 do gb[o * bs] = gb[o * bs] + sums[o * K1 + K] end
  end
end

return M
