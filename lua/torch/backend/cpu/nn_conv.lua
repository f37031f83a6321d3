-- The passes of nn.SpatialConvolution (and the modules built on it): im2col / col2im
-- (unfold.lua) and one BLAS GEMM per image straight on the buffers (no tensor views,
-- no checks per image: the module has checked everything).
--
-- Images go a few at a time, a chunk of about CHUNK_BYTES of columns (half a core's L2 cache
-- on the machine it was tuned on): what a chunk's im2col (or gradient GEMM) writes is still in
-- the cache when its GEMM (or col2im) reads it.
-- So the columns are not kept from the forward pass for accGradParameters, which unfolds its
-- input again: that costs less than reading a whole batch's columns back from memory (25 times
-- the input for a 5x5 kernel over one plane).
--
-- The bias rides in the GEMMs: each image's column block has K + 1 rows, the last all ones;
-- the forward multiplies it by the weight with the bias as an extra column (no fill pass over
-- the output), and accGradParameters gets the bias gradient (the sums of gradOutput's planes)
-- as the extra column of the weight gradient's product.
local backend = require 'torch.backend'
local check = require 'torch.core.check'
local apply = require 'torch.backend.cpu.apply'
local blas = require 'torch.backend.cpu.blas'
local unfold = require 'torch.backend.cpu.unfold'
local convdnnl = require 'torch.backend.cpu.dnnl_nn'
local planes = require 'torch.backend.cpu.planes'
local convThreads = require 'torch.backend.cpu.conv_threads'

local conv = {}
local ptr = apply.ptr
local CHUNK_BYTES = 512 * 1024

-- dst (O x (K + 1)) = [w | bias] (w O x K contiguous, bias with stride bs)
local withBias = apply.perType('conv weight and bias', [[
return function(dst, w, b, bs, O, K)
  for o = 0, O - 1 do
    for k = 0, K - 1 do dst[o * (K + 1) + k] = w[o * K + k] end
    dst[o * (K + 1) + K] = b[o * bs]
  end
end]])

-- gw[o][k] += s[k][o] (k < K), and gb[o] += s[K][o] when gb (stride bs) is not nil; s's
-- rows are M apart
local addSums = apply.perType('conv gradient sums', [[
return function(gw, gb, bs, s, M, O, K)
  for o = 0, O - 1 do
    for k = 0, K - 1 do gw[o * K + k] = gw[o * K + k] + s[k * M + o] end
    if gb ~= nil then gb[o * bs] = gb[o * bs] + s[K * M + o] end
  end
end]])

-- row K of each of the B column blocks (K + 1 rows of N) = 1
local onesRows = apply.perType('conv ones rows', [[
return function(col, B, K, N)
  for b = 0, B - 1 do
    local r = (b * (K + 1) + K) * N
    for n = 0, N - 1 do col[r + n] = 1 end
  end
end]])

-- The buffer `name` of e (the module's cache entry): a tensor like `like`, of n elements at
-- least. A new or grown buffer forgets e.ones (see unfoldChunk).
local function buffer(e, name, like, n)
  local t = e[name]
  if not t or t._dt ~= like._dt then t = like.new(); e[name] = t; e.ones = nil end
  if not t._st or t._st._n < n then t:resize(n); e.ones = nil end
  return t
end

-- images per chunk, for column blocks of `rows` x N
local function chunkOf(g, rows, dt)
  return math.max(1, math.min(g.B, math.floor(CHUNK_BYTES / (rows * g.N * dt.size))))
end

-- The chunk buffer with the columns (K1 rows of N per image, the last all ones when
-- K1 = K + 1) of input's images [first, first + count). The rows of ones stay from one call
-- to the next (e.ones says for which blocks) until blocks of another layout (conv.backward's,
-- or those without them) are written over them, or padding makes im2col clear whole blocks.
local function unfoldChunk(e, g, input, K1, first, count)
  local columns = buffer(e, 'columns', input, chunkOf(g, K1, input._dt) * K1 * g.N)
  g.colStride = K1 * g.N
  unfold.im2col(input, columns, g, first, count, 0)
  local c, ones = ptr(columns), e.ones
  if K1 == g.K then
    e.ones = nil   -- blocks of K rows: they overlap where the rows of ones were
  elseif not (ones and ones.K == g.K and ones.N == g.N and ones.count >= count and g.padH == 0
      and g.padW == 0) then
    onesRows[columns._dt](c, count, g.K, g.N)
    e.ones = { K = g.K, N = g.N, count = count }
  end
  return c
end

-- output (B x O x N) = weight (O x K) * the patches of input (B x K x N) [+ bias]
function conv.forward(e, g, input, weight, bias, output)
  local dt, O, K, N = output._dt, g.O, g.K, g.N
  local w, K1 = ptr(weight), K
  if bias then
    K1 = K + 1
    local wb = buffer(e, 'weightAndBias', weight, O * K1)
    withBias[dt](ptr(wb), w, ptr(bias), bias._str[1], O, K)
    w = ptr(wb)
  end
  local out, step = ptr(output), chunkOf(g, K1, dt)
  for first = 0, g.B - 1, step do
    local count = math.min(step, g.B - first)
    local c = unfoldChunk(e, g, input, K1, first, count)
    -- row-major out_b = W c_b is, column-major, out_b^T (N x O) = c_b^T (N x K1) W^T (K1 x O)
    for b = 0, count - 1 do
      blas.gemm(dt, false, false, N, O, K1, 1, c + b * K1 * N, N, w, K1, 0, out + (first + b) * O * N, N)
    end
  end
end

-- gradInput = col2im(weight^T (K x O) * gradOutput (B x O x N))
function conv.backward(e, g, weight, gradOutput, gradInput)
  local dt, O, K, N = gradOutput._dt, g.O, g.K, g.N
  local step = chunkOf(g, K, dt)
  local columns = buffer(e, 'columns', gradOutput, step * K * N)
  local w, go, c = ptr(weight), ptr(gradOutput), ptr(columns)
  e.ones = nil
  g.colStride = K * N
  for first = 0, g.B - 1, step do
    local count = math.min(step, g.B - first)
    -- column-major, c_b^T (N x K) = gradOutput_b^T (N x O) W (O x K)
    for b = 0, count - 1 do
      blas.gemm(dt, false, true, N, K, O, 1, go + (first + b) * O * N, N, w, K, 0, c + b * K * N, N)
    end
    unfold.col2im(columns, gradInput, g, false, first, count, 0)
  end
end

-- gradWeight (O x K) += scale * sum_b gradOutput_b (O x N) columns_b^T (N x K), columns_b the
-- patches of input; and gradBias, when not nil, += scale * the sums of gradOutput's planes.
-- With fewer than 8 planes, the product runs on 8 rows of gradOutput (the next images' first
-- planes, where gradOutput has them, give the extra rows; their results are not read):
-- OpenBLAS's AVX2 kernels run an 8-row product faster than a 6-row one (LeNet's first layer).
function conv.accGrad(e, g, input, gradOutput, gradWeight, gradBias, scale)
  local B, dt, O, K, N = g.B, gradOutput._dt, g.O, g.K, g.N
  if B == 0 then return end
  local K1 = gradBias and K + 1 or K
  local M = math.max(O, 8)
  local sums = buffer(e, 'gradSums', gradWeight, M * K1)
  local s, go, step = ptr(sums), ptr(gradOutput), chunkOf(g, K1, dt)
  for first = 0, B - 1, step do
    local count = math.min(step, B - first)
    local c = unfoldChunk(e, g, input, K1, first, count)
    -- column-major, sums (M x K1) = gradOutput_b (M x N, read as the transpose of N x M) c_b^T;
    -- this way round BLAS runs the convolutions' shapes faster than with the factors swapped
    for b = first, first + count - 1 do
      local rows = b * O + M <= B * O and M or O
      blas.gemm(dt, true, false, rows, K1, N, scale, go + b * O * N, N, c + (b - first) * K1 * N, N,
        b == 0 and 0 or 1, s, M)
    end
  end
  addSums[dt](ptr(gradWeight), gradBias and ptr(gradBias), gradBias and gradBias._str[1] or 0, s, M, O, K)
end

-- The op table's convolution passes on the CPU (the CUDA ones: backend/cuda/nn_conv.lua):
-- oneDNN where it serves the geometry (dnnl_nn.lua), else the im2col passes above.
-- e: the module's cache entry, g: its geometry (SpatialConvolution:_geometry); operands
-- contiguous and checked, results sized.
--
-- oneDNN's kernels take channels 16 at a time (input channels from 16 on; below, its first-layer
-- kernels read the plain image): the share of their work that is not padding, `fill`, decides
-- where convolutions of fewer than conv.dnnlChannels.oneThread input channels run (measured on
-- 2 idle cores, best of 5, ms at 1 thread / 2 threads, im2col -> oneDNN; docs/performance.md):
-- - fill >= 0.9 (ResNet's and VGG's first layers, 16 -> 32): oneDNN on any count (ResNet's 3 ->
--   64 7x7 at batch 8: forward 33.0 -> 13.0, weight gradient 32.3 -> 16.6 on one thread);
-- - else on one thread im2col (LeNet's 20 -> 50, fill 0.49: forward 9.1 against 11.2; and
--   inside the model 6.7-7.1 against 7.2-7.8 on channels-last kernels, which skip the padding
--   but pay a reorder), on two oneDNN (channels-last there, dnnl_nn.lua: 3.4 against 7.6);
-- - gradInput on fewer than conv.dnnlChannels.gradInput channels stays with im2col on any
--   count (a 3-channel image: 3.6 ms against 10.8, 34.6 against 66.4 for ResNet's first layer).
conv.dnnlChannels = { oneThread = 32, gradInput = 16, fill = 0.9 }

local function ceil16(n) return 16 * math.ceil(n / 16) end

-- the oneDNN description of g for `pass` ('forward', 'gradInput', 'accGrad'), or nil where
-- im2col runs it
local function onednn(g, pass)
  local d = convdnnl.of(g, g.dt)
  local rule = conv.dnnlChannels
  if not d or g.C >= rule.oneThread then return d end
  if pass == 'gradInput' and g.C < rule.gradInput then return nil end
  local fill = (g.C < 16 and 1 or g.C / ceil16(g.C)) * g.O / ceil16(g.O)
  if fill >= rule.fill and (pass ~= 'gradInput' or g.C % 16 == 0) then return d end
  return convdnnl.threads() >= 2 and d or nil
end

-- First layers of fewer than 16 input channels whose output channels fill oneDNN's blocks
-- poorly (LeNet's 1 -> 20: 20 of 32) on 2 threads or more: im2col split over the batch
-- (conv_threads.lua), where oneDNN's 2 threads only match one of im2col (256 images: forward
-- 2.3 ms on 1 thread of im2col, 2.3 on 2 of oneDNN; weight gradient 3.0 / 2.6). nil: not here.
-- conv.splitBatch = false keeps those on oneDNN.
conv.splitBatch = true
local function split(g)
  if not conv.splitBatch or g.C >= 16 or g.O / ceil16(g.O) >= conv.dnnlChannels.fill then return nil end
  return convThreads.threads(g, g.dt)
end

backend.register('cpu', {
  spatial_conv_forward = function(e, g, output, input, weight, bias)
    local n = split(g)
    if n then return convThreads.forward(e, g, n, input, weight, bias, output) end
    local d = onednn(g, 'forward')
    if not (d and convdnnl.forward(d, input, weight, bias, output)) then
      conv.forward(e, g, input, weight, bias, output)
    end
  end,
  spatial_conv_grad_input = function(e, g, gradInput, gradOutput, weight)
    local d = onednn(g, 'gradInput')
    if not (d and convdnnl.backward(d, weight, gradOutput, gradInput)) then
      conv.backward(e, g, weight, gradOutput, gradInput)
    end
  end,
  spatial_conv_acc_grad = function(e, g, gradWeight, gradBias, input, gradOutput, scale)
    local n = split(g)
    if n then return convThreads.accGrad(e, g, n, input, gradOutput, gradWeight, gradBias, scale) end
    local d = onednn(g, 'accGrad')
    if not (d and convdnnl.accGrad(d, input, gradOutput, gradWeight, gradBias, scale)) then
      conv.accGrad(e, g, input, gradOutput, gradWeight, gradBias, scale)
    end
  end,
})

-- SpatialDepthWiseConvolution's passes on oneDNN (Float, where installed): a convolution of
-- nInputPlane groups of one input plane and nOutputPlane output planes each, the module's
-- output order. pass 'forward' (output, input), 'gradInput' (gradInput, gradOutput),
-- 'accGrad' (input, gradOutput, scale); m the module, g its _geometry, tensors sized and
-- contiguous. Returns false (nothing written) where oneDNN does not serve it: the module's own
-- im2col + bmm passes run then. Measured on one core, best of 5, MobileNet's 3x3 over 32
-- planes of 56x56 at batch 16: forward 13.2 -> 1.4 ms, gradInput 12.9 -> 1.4, weight gradient
-- 5.2 -> 1.4; 512 planes of 7x7: 5.4 -> 0.4, 7.9 -> 0.4, 2.4 -> 0.4.
local function depthwise(m, g, x)
  local n, mult, t = m.nInputPlane, m.nOutputPlane, torch.type(x)
  if torch.type(m.weight) ~= t or m.bias and torch.type(m.bias) ~= t
      or m.gradWeight and torch.type(m.gradWeight) ~= t or m.gradBias and torch.type(m.gradBias) ~= t then
    return nil
  end
  return convdnnl.of({ B = g.images, C = n, H = g.H, W = g.W, O = n * mult, kH = g.kH, kW = g.kW,
    dH = g.dH, dW = g.dW, padH = g.padH, padW = g.padW, oH = g.oH, oW = g.oW, groups = n }, x._dt)
end

backend.register('cpu', {
  spatial_depthwise_conv = function(pass, m, g, a, b, scale)
    local d = depthwise(m, g, a)
    if not d then return false end
    local w = m:_perPlane(m.weight, g.K, 'weight')   -- nInputPlane x nOutputPlane x kH*kW
    if pass == 'forward' then
      return convdnnl.forward(d, b, w, m.bias and m:_perPlane(m.bias, 1, 'bias'):view(-1), a)
    elseif pass == 'gradInput' then
      return convdnnl.backward(d, w, b, a)
    end
    local n, mult = m.nInputPlane, m.nOutputPlane
    m._gw = m._gw or a.new()
    m._gw:resize(n, mult, g.K):zero()
    local gb = m.gradBias and (m._gb or a.new()):resize(n * mult):zero()
    m._gb = gb or m._gb
    if not convdnnl.accGrad(d, a, b, m._gw, gb, scale) then return false end
    m.gradWeight:view(mult, n, g.K):add(m._gw:transpose(1, 2))
    if gb then m.gradBias:view(mult, n):add(gb:view(n, mult):t()) end
    return true
  end,
})

-- SpatialFullConvolution's (and VolumetricFullConvolution's) passes on the CPU (the CUDA ones:
-- backend/cuda/nn_conv.lua): per image one GEMM to the nOutputPlane*kH*kW x H*W column matrix,
-- then col2im into the output; or, where oneDNN serves the geometry, its convolution passes with
-- the roles swapped. m is the module (its columns buffer, nInputPlane), g its _geometry; output
-- and gradInput sized, gradOutput checked.

-- the weight as nInputPlane x K, and its expansion over the batch
local function fullWeights(m, w, B, K)
  if not w:isContiguous() then
    check.error(torch.typename(m) .. ': weight and gradWeight must be contiguous')
  end
  local v = w:view(m.nInputPlane, K)
  return v, v:view(1, m.nInputPlane, K):expand(B, m.nInputPlane, K)
end

-- The oneDNN description of g (the convolution whose image is the module's output), or nil.
local function fullOnednn(m, g, x)
  local w = m.weight
  if torch.type(w) ~= torch.type(x) or not w:isContiguous() then return nil end
  return convdnnl.of(g, x._dt)
end

-- the unfolded gradOutput, B x K x N
local function fullColumns(m, gradOutput, g)
  m.columns = m.columns or gradOutput.new()
  m.columns:resize(g.B, g.K, g.N)
  unfold.im2col(gradOutput:contiguous(), m.columns, g)
  return m.columns
end

backend.register('cpu', {
  spatial_full_conv_forward = function(m, g, output, x, weight, bias)
    local d = fullOnednn(m, g, x)
    if d then
      x = x:contiguous()
      if convdnnl.backward(d, weight, x, output) then
        if bias then convdnnl.addBias(output, bias, g.B, g.C, g.M) end
        return
      end
    end
    x = x:contiguous():view(g.B, m.nInputPlane, g.N)
    local _, w = fullWeights(m, weight:contiguous(), g.B, g.K)
    m.columns = m.columns or x.new()
    m.columns:resize(g.B, g.K, g.N):bmm(w:transpose(2, 3), x)
    if bias then planes.fill(output, bias, g.B, g.C, g.M) end
    unfold.col2im(m.columns, output, g, bias ~= nil)
  end,
  spatial_full_conv_grad_input = function(m, g, gradInput, gradOutput, weight)
    local d = fullOnednn(m, g, gradInput)
    if not (d and gradInput:isContiguous() and convdnnl.forward(d, gradOutput:contiguous(), weight, nil, gradInput)) then
      local cols = fullColumns(m, gradOutput, g)
      local _, w = fullWeights(m, weight:contiguous(), g.B, g.K)
      gradInput:view(g.B, m.nInputPlane, g.N):bmm(w, cols)
    end
  end,
  -- gradBias (or nil) += scale * the sums of gradOutput's planes
  spatial_full_conv_acc_grad = function(m, g, gradWeight, gradBias, x, gradOutput, scale)
    local d = fullOnednn(m, g, x)
    local gw = fullWeights(m, gradWeight, g.B, g.K)
    if not (d and torch.type(gradWeight) == torch.type(x)
        and convdnnl.accGrad(d, gradOutput:contiguous(), x:contiguous(), gradWeight, nil, scale)) then
      local cols = fullColumns(m, gradOutput, g)
      gw:addbmm(scale, x:contiguous():view(g.B, m.nInputPlane, g.N), cols:transpose(2, 3))
    end
    if gradBias then planes.accSum(gradBias, gradOutput:contiguous(), g.B, g.C, g.M, scale) end
  end,
})

return conv
