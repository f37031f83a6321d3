-- im2col / col2im for the convolution modules, one FFI loop per element type over a whole
-- batch, for 2D and 3D (volumetric) convolutions. Tap (i, j) of output (y, x) reads input
-- (y*dH - padH + i*dilationH, x*dW - padW + j*dilationW), and likewise along time.
-- The column buffer of image b is a K x N matrix (K = C*kT*kH*kW rows in (c, t, i, j) order,
-- N = oT*oH*oW columns in (t, y, x) order) at element b*K*N: torch7's finput layout; or at
-- b*g.colStride when the geometry gives one (the convolution keeps a row of ones after each
-- image's K rows, for its bias).
-- Out-of-image (padding) taps read as zero: the column buffer is zeroed first when there is
-- padding, so the loops only touch the in-image run [x0, x1) of each output row.
local ffi = require 'ffi'
local apply = require 'torch.backend.cpu.apply'
local ufunc = require 'torch.backend.cpu.ufunc'
local backend = require 'torch.backend'

local unfold = {}

-- Kernel source walking each tap (a, i, j) of the kT x kH x kW window over P planes of T x H x
-- W, for im2col / col2im and max pooling: PLANE starts plane p; ROW handles output row (ot, y)
-- of tap number `tap` (0-based, in window order), in the image for the output columns
-- [x0, x1): output column x is at orow + x in the output plane and reads the input plane at
-- r + x * dW. SIGNATURE names the function's arguments, which must include the walk's.
function unfold.tapWalk(signature, plane, row)
  local code = [[
local floor, max, min = math.floor, math.max, math.min
-- the outputs o in [o0, o1) whose tap o*d + off lies in [0, n)
local function range(off, d, n, on)
  local o0 = min(on, max(0, floor((d - 1 - off) / d)))
  return o0, max(o0, min(on, floor((n - 1 - off) / d) + 1))
end
return function(SIGNATURE)
  local plane, oplane = T * H * W, oT * oH * oW
  for p = 0, P - 1 do
    PLANE
    for a = 0, kT - 1 do
      local ta = a * lT - padT
      local t0, t1 = range(ta, dT, T, oT)
      for i = 0, kH - 1 do
        local ti = i * lH - padH
        local y0, y1 = range(ti, dH, H, oH)
        for j = 0, kW - 1 do
          local tj = j * lW - padW
          local x0, x1 = range(tj, dW, W, oW)
          local tap = (a * kH + i) * kW + j
          for ot = t0, t1 - 1 do
            for y = y0, y1 - 1 do
              local r = ((ot * dT + ta) * H + y * dH + ti) * W + tj
              local orow = (ot * oH + y) * oW
              ROW
            end
          end
        end
      end
    end
  end
end]]
  return (code:gsub('%u%u+', { SIGNATURE = signature, PLANE = plane, ROW = row }))
end

-- im2col / col2im: plane p is channel c of image (p - c) / C; its column rows start at dst.
local function walk(row)
  return unfold.tapWalk('img, io, col, co, P, T, H, W, kT, kH, kW, dT, dH, dW, padT, padH, padW, ' ..
    'oT, oH, oW, lT, lH, lW, esize, addRow, C, step',
    'local c = p % C\n    local src, dst = io + p * plane, co + (p - c) / C * step + c * kT * kH * kW * oplane',
    'local s, d = src + r, dst + tap * oplane + orow\n' .. row)
end

-- With dW == 1 the in-image run of a row is contiguous in both buffers: im2col copies it with
-- memcpy and col2im adds it with numpy's SIMD add loop (addRow), one call per run instead of a
-- short Lua loop (whose entry and exit cost more than its few elements).
local im2colLoops = apply.perType('im2col', 'local ffi = require "ffi"\n' .. walk [[
if dW == 1 then ffi.copy(col + (d + x0), img + (s + x0), (x1 - x0) * esize)
else for x = x0, x1 - 1 do col[d + x] = img[s + x * dW] end end]])
local col2imLoops = apply.perType('col2im', walk [[
if dW == 1 and addRow then addRow(x1 - x0, img + (s + x0), col + (d + x0))
else for x = x0, x1 - 1 do img[s + x * dW] = img[s + x * dW] + col[d + x] end end]])

-- dst[0..n) += src[0..n) through numpy's add loop for the element type, or nil
local adders = {}
local function rowAdder(dt)
  if adders[dt] == nil then
    local l = ufunc.loop('add', dt.name == 'Double' and 'dd->d' or 'ff->f')
    local es = dt.size
    adders[dt] = l and function(n, dst, src) ufunc.binary(l, n, dst, es, src, es, dst, es) end or false
  end
  return adders[dt] or nil
end

local function zero(t)
  ffi.fill(t._st._ptr + t._off, apply.numel(t) * t._dt.size)
end

-- the elements from one image's column block to the next
local function colStride(g)
  return g.colStride or g.C * (g.kT or 1) * g.kH * g.kW * (g.oT or 1) * g.oH * g.oW
end

-- g: { B, C, H, W, kH, kW, dH, dW, padH, padW, oH, oW } and optionally dilationH, dilationW
-- and the time dim's T, kT, dT, padT, oT, dilationT (a volume; 1 or 0 when absent); img
-- contiguous B x C x (T x) H x W, col contiguous B x K x N (resized by the caller).
-- first, count, block: the images [first, first + count) of img (default all) and as many
-- column blocks of col from `block` (default first).
local function run(loops, img, col, g, first, count, block)
  local io = img._off + first * g.C * (g.T or 1) * g.H * g.W
  local co = col._off + block * colStride(g)
  loops[img._dt](img._st._ptr, io, col._st._ptr, co, count * g.C, g.T or 1, g.H, g.W,
    g.kT or 1, g.kH, g.kW, g.dT or 1, g.dH, g.dW, g.padT or 0, g.padH, g.padW, g.oT or 1, g.oH, g.oW,
    g.dilationT or 1, g.dilationH or 1, g.dilationW or 1, img._dt.size, rowAdder(img._dt), g.C,
    colStride(g))
end

-- 2D, without padding or dilation and with short rows (kW * oW <= 48 and W <= 96: a longer
-- trace is aborted by LuaJIT; LeNet's second layer has 40 and 12): loops generated per
-- geometry, with the sizes as constants and the taps unrolled (short inner loops or per-row
-- memcpy calls would cost more to enter and leave than their few elements).
-- im2col: for each kernel row i and output row y, the row of each tap; with dW == 1 an ffi.copy
-- of constant length, which LuaJIT compiles to a few word moves (no float conversions), so
-- rows of up to ROW_BYTES unroll too (LeNet's first layer: 5 copies of 24 floats, else a
-- memcpy call each). With dW == 1 each step copies RY output rows, as many as fit in
-- ITER_BYTES and ITER_COPIES (a longer trace is aborted; LeNet's: 2 rows of 5 x 96 bytes,
-- 4 of 5 x 32 bytes).
local ROW_BYTES, ITER_BYTES, ITER_COPIES = 512, 1000, 20
local function im2colSource(g, N, esize)
  local rowBytes, RY = g.kW * g.oW * esize, 1
  for r = 2, g.oH do   -- the most that divide oH
    if g.dW == 1 and g.oH % r == 0 and r * rowBytes <= ITER_BYTES and r * g.kW <= ITER_COPIES then RY = r end
  end
  local row = {}
  for r = 0, RY - 1 do
    for j = 0, g.kW - 1 do
      local so, do_ = r * g.dH * g.W + j, j * N + r * g.oW
      if g.dW == 1 then
        row[#row + 1] = ('copy(d + %d, s + %d, %d)'):format(do_, so, g.oW * esize)
      else
        for x = 0, g.oW - 1 do row[#row + 1] = ('d[%d] = s[%d]'):format(do_ + x, so + x * g.dW) end
      end
    end
  end
  return (([[
local copy = require('ffi').copy
return function(img, io, col, co, P, C, step)
  for p = 0, P - 1 do
    local c = p % C
    local src, dst = io + p * PLANE, co + (p - c) / C * step + c * KN
    for i = 0, KH - 1 do
      for y = 0, OH - 1, RY do
        local s, d = img + (src + (y * DH + i) * WW), col + (dst + i * KW * NN + y * OW)
        ROW
      end
    end
  end
end]]):gsub('%u%u+', { PLANE = g.H * g.W, KN = g.kH * g.kW * N, KH = g.kH, KW = g.kW,
    NN = N, WW = g.W, OH = g.oH, OW = g.oW, DH = g.dH, RY = RY, ROW = table.concat(row, '; ') }))
end

-- col2im gathers: each image row Y adds to each of its elements (or, to `store`, sets it to)
-- the sum of all the column entries taken from it (over the (kernel row i, output row y) pairs
-- with y * dH + i = Y and their taps), one write per element. The rows go in groups of at most
-- GATHER_LOADS loads and writes, each group a loop over the planes, and the pairs' column offsets are
-- read from an array: LuaJIT would fold constant ones into every load's offset, and a trace
-- with more than 500 distinct constants is aborted.
local GATHER_LOADS = 700
local function col2imSource(g, N, store)
  local groups, group, loads, offsets = {}, {}, 0, {}
  for Y = 0, g.H - 1 do
    local pairs_, code, n = {}, { ('local s = s0 + %d'):format(Y * g.W) }, 0
    for i = 0, g.kH - 1 do
      local y = (Y - i) / g.dH
      if y >= 0 and y < g.oH and y % 1 == 0 then
        offsets[#offsets + 1] = i * g.kW * N + y * g.oW
        pairs_[#pairs_ + 1] = #offsets - 1
      end
    end
    for k, at in ipairs(pairs_) do code[#code + 1] = ('local q%d = d0 + offsets[%d]'):format(k, at) end
    for X = 0, g.W - 1 do
      local terms = {}
      for k = 1, #pairs_ do
        for j = 0, g.kW - 1 do
          local x = (X - j) / g.dW
          if x >= 0 and x < g.oW and x % 1 == 0 then terms[#terms + 1] = ('q%d[%d]'):format(k, j * N + x) end
        end
      end
      if store then
        code[#code + 1] = ('s[%d] = %s'):format(X, #terms > 0 and table.concat(terms, ' + ') or '0')
      elseif #terms > 0 then
        code[#code + 1] = ('s[%d] = s[%d] + (%s)'):format(X, X, table.concat(terms, ' + '))
      end
      n = n + #terms + ((store or #terms > 0) and 1 or 0)
    end
    if n > 0 then
      if loads + n > GATHER_LOADS and #group > 0 then groups[#groups + 1], group, loads = group, {}, 0 end
      group[#group + 1] = 'do ' .. table.concat(code, '; ') .. ' end'
      loads = loads + n
    end
  end
  groups[#groups + 1] = group
  local loops = {}
  for k, rows in ipairs(groups) do
    loops[k] = ([[
  for p = 0, P - 1 do
    local c = p % C
    local s0, d0 = img + (io + p * PLANE), col + (co + (p - c) / C * step + c * KN)
    ROWS
  end]]):gsub('%u%u+', { PLANE = g.H * g.W, KN = g.kH * g.kW * N, ROWS = table.concat(rows, '\n    ') })
  end
  return ('local offsets = require("ffi").new("int32_t[?]", %d, { %s })\n'):format(#offsets,
    table.concat(offsets, ', ')) .. 'return function(img, io, col, co, P, C, step)\n'
    .. table.concat(loops, '\n') .. '\nend'
end

-- mode: 'im2col', 'col2im' (img = the patches) or 'col2imAdd' (img += the patches)
local unrolled = {}
local function unrolledLoop(dt, g, mode)
  -- kept in g too: a memoized geometry then skips making the key
  local f = g[mode]
  if f and g.loopType == dt then return f end
  local key = ('%s %s %d %d %d %d %d %d %d %d'):format(dt.name, mode, g.H, g.W, g.kH, g.kW, g.dH,
    g.dW, g.oH, g.oW)
  if not unrolled[key] then
    local N = g.oH * g.oW
    unrolled[key] = apply.perType(key, mode == 'im2col' and im2colSource(g, N, dt.size)
      or col2imSource(g, N, mode == 'col2im'))[dt]
  end
  if g.loopType ~= dt then g.im2col, g.col2im, g.col2imAdd, g.loopType = nil, nil, nil, dt end
  g[mode] = unrolled[key]
  return unrolled[key]
end

local function unrolls(g, mode, esize)
  return g.padH == 0 and g.padW == 0 and (g.padT or 0) == 0 and (g.T or 1) == 1
    and (g.kT or 1) == 1 and (g.dilationH or 1) == 1 and (g.dilationW or 1) == 1 and g.W <= 96
    and (g.kW * g.oW <= 48 or mode == 'im2col' and g.dW == 1 and g.kW * g.oW * esize <= ROW_BYTES)
end

local function unrolledRun(img, col, g, mode, first, count, block)
  local io = img._off + first * g.C * g.H * g.W
  local step = colStride(g)
  unrolledLoop(img._dt, g, mode)(img._st._ptr, io, col._st._ptr, col._off + block * step, count * g.C, g.C, step)
end

-- col = the unfolded patches of img; of its images [first, first + count) into col's blocks
-- from `block` when given (default: all the images, block = first).
function unfold.im2col(img, col, g, first, count, block)
  first = first or 0
  count, block = count or g.B - first, block or first
  if unrolls(g, 'im2col', img._dt.size) then
    return unrolledRun(img, col, g, 'im2col', first, count, block)
  end
  if g.padH > 0 or g.padW > 0 or (g.padT or 0) > 0 then
    ffi.fill(col._st._ptr + col._off + block * colStride(g), count * colStride(g) * col._dt.size)
  end
  run(im2colLoops, img, col, g, first, count, block)
end

-- img = (img when keep, else 0) + the patches in col, each added back where im2col took it;
-- likewise for the images [first, first + count) of img (default all; the others are left as
-- they are) from col's blocks at `block` (default first)
function unfold.col2im(col, img, g, keep, first, count, block)
  first = first or 0
  count, block = count or g.B - first, block or first
  if unrolls(g, 'col2im') then
    return unrolledRun(img, col, g, keep and 'col2imAdd' or 'col2im', first, count, block)
  end
  if not keep then
    local n = g.C * (g.T or 1) * g.H * g.W
    ffi.fill(img._st._ptr + img._off + first * n, count * n * img._dt.size)
  end
  run(col2imLoops, img, col, g, first, count, block)
end

unfold.zero = zero

-- The ops im2col(img, col, g, first, count, block) and col2im(col, img, g, keep, first, count,
-- block) of the modules that unfold (SpatialConvolutionLocal, SpatialDepthWiseConvolution,
-- SpatialFullConvolution, ...; the CUDA ones: backend/cuda/nn_conv.lua).
backend.register('cpu', { im2col = unfold.im2col, col2im = unfold.col2im })

return unfold
