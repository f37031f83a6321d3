-- The CPU op table's pooling passes (nn's max, average, adaptive and unpooling modules; their
-- front end: nn/util/pool.lua): max and average pooling over P planes of T x H x W (2D pooling
-- is the T = 1 case), one FFI loop per element type. Indices (torch7's) are 1-based flat
-- offsets inside a plane.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local unfold = require 'torch.backend.cpu.unfold'
local convdnnl = require 'torch.backend.cpu.dnnl_nn'
local parallel = require 'torch.backend.cpu.parallel'

-- A walk over the outputs (ot, oy, ox) of each plane (o: the output's offset); BODY sees the
-- window's input ranges [t0, t1) [y0, y1) [x0, x1), to walk with the dilation steps (lT, lH,
-- lW). The loops receive the geometry unpacked.
local header = [[
local max, min, huge = math.max, math.min, math.huge
return function(ip, io, op, oo, xp, xo, P, T, H, W, oT, oH, oW, kT, kH, kW, dT, dH, dW,
                pT, pH, pW, lT, lH, lW, countPad, divide)
  local plane, oplane = T * H * W, oT * oH * oW
  for p = 0, P - 1 do
    local ib, ob = io + p * plane, oo + p * oplane
    local o = ob
    for ot = 0, oT - 1 do
      local t0 = ot * dT - pT
      local t1 = min(t0 + (kT - 1) * lT + 1, T)
      while t0 < 0 do t0 = t0 + lT end
      for oy = 0, oH - 1 do
        local y0 = oy * dH - pH
        local y1 = min(y0 + (kH - 1) * lH + 1, H)
        while y0 < 0 do y0 = y0 + lH end
        for ox = 0, oW - 1 do
          local x0 = ox * dW - pW
          local x1 = min(x0 + (kW - 1) * lW + 1, W)
          while x0 < 0 do x0 = x0 + lW end
          BODY
          o = o + 1
        end
      end
    end
  end
end]]

-- Max pooling's gradient needs no window walk: each output's gradient goes to its index (1-based
-- in its plane) in gradInput (zeroed). ip/io: gradInput, op/oo: gradOutput, xp/xo: indices.
-- maxScatterZero zeroes each plane of gradInput first (esize: its element's bytes): on threads,
-- each plane is zeroed and filled by the thread that has it in cache.
local scatterLoop = [[
local fill = require('ffi').fill
return function(ip, io, op, oo, xp, xo, P, plane, oplane, esize)
  for p = 0, P - 1 do
    local ib, ob, xb = io + p * plane - 1, oo + p * oplane, xo + p * oplane
    ZERO
    for q = 0, oplane - 1 do
      local at = xp[xb + q]
      if at > 0 then ip[ib + at] = ip[ib + at] + op[ob + q] end
    end
  end
end]]
local maxScatter = scatterLoop:gsub('ZERO', '')
local maxScatterZero = scatterLoop:gsub('ZERO', 'fill(ip + (ib + 1), plane * esize)')

-- average pooling (no dilation): the divisor counts the padded window (clipped at the padded
-- border) when countPad, else the in-image part; divide = false multiplies back by the kernel
-- size, as torch7
local avgWindow = [[
          local t0p, y0p, x0p = ot * dT - pT, oy * dH - pH, ox * dW - pW
          local n
          if countPad then
            n = (min(t0p + kT, T + pT) - t0p) * (min(y0p + kH, H + pH) - y0p) * (min(x0p + kW, W + pW) - x0p)
          else n = (t1 - t0) * (y1 - y0) * (x1 - x0) end
          if not divide then n = n / (kT * kH * kW) end]]

local avgForward = avgWindow .. [[

          local s = 0
          for t = t0, t1 - 1 do
            for y = y0, y1 - 1 do
              local r = ib + (t * H + y) * W
              for x = x0, x1 - 1 do s = s + ip[r + x] end
            end
          end
          op[o] = s / n]]

local avgBackward = avgWindow .. [[

          local g = op[o] / n
          for t = t0, t1 - 1 do
            for y = y0, y1 - 1 do
              local r = ib + (t * H + y) * W
              for x = x0, x1 - 1 do ip[r + x] = ip[r + x] + g end
            end
          end]]

-- Max pooling runs tap by tap (long inner loops over output columns, which LuaJIT traces well,
-- rather than tiny loops over each window); taps in window order and a strict > keep the first
-- maximum of a window, as torch7. The update has no data-dependent branch (LuaJIT makes no
-- conditional moves, and a branch taken at random costs a trace exit): the index moves by
-- s = 1 or 0, clamped from (v - best) scaled past any positive difference.
local maxForward = 'local huge = math.huge\n' .. unfold.tapWalk(
  'ip, io, op, oo, xp, xo, P, T, H, W, oT, oH, oW, kT, kH, kW, dT, dH, dW, padT, padH, padW, lT, lH, lW',
  [[local ib, ob, xb = io + p * plane, oo + p * oplane, xo + p * oplane
    for o = 0, oplane - 1 do op[ob + o] = -huge; xp[xb + o] = 0 end]],
  [[for ox = x0, x1 - 1 do
                local k = r + ox * dW
                local v, q = ip[ib + k], orow + ox
                local best = op[ob + q]
                local x = (v - best) * 1e300 * 1e300
                if x == x then
                  local s = min(1, max(0, x))   -- 1 if v > best else 0
                  op[ob + q] = max(v, best)
                  local at = tonumber(xp[xb + q])
                  xp[xb + q] = at + (k + 1 - at) * s
                elseif v ~= v or xp[xb + q] == 0 then
                  -- rare: a NaN tap wins (as torch7), and a window of -inf keeps its first tap
                  op[ob + q], xp[xb + q] = v, k + 1
                end
              end]])

local loops = { maxForward = apply.perType('pool maxForward', maxForward),
                maxScatter = apply.perType('pool maxScatter', maxScatter) }
-- The max pooling loops over chunks of planes on several threads (parallel.lua; its switch,
-- parallel.enabled = false, keeps the loops above, called as before)
local threaded = {
  maxForward = parallel.loop('pool maxForward', parallel.planes(maxForward, 18), parallel.planesSignature(18)),
  maxScatter = parallel.loop('pool maxScatter', parallel.planes(maxScatterZero, 3), parallel.planesSignature(3)),
}
-- Elements of work (input elements read or gradInput elements written) a thread must have:
-- about 30 us of these loops (waking a worker costs a few)
local PLANE_LEAST = 32768
-- The same for the unrolled backward on small planes (LeNet's second pooling: about 0.26 ns an
-- element, a third of the forward's): on 2 threads it lost at 102K and 205K elements a thread
-- (batch 64 and 128: 1.5x and 1.2-1.3x the one-thread time, bench/loop_threads.lua; 0.100
-- against 0.092 ms inside LeNet's step at batch 64, bench/two_threads.lua) and was even at
-- 410K (batch 256): a worker's wake-up on a shared VM is tens of µs
local UNROLLED_BACK_LEAST = 262144

-- Whether n indices from xp + xo are all in 1..top: a chunk with one outside raises (the
-- caller's pcall turns that into false)
local indicesIn = parallel.loop('pool indices check', [[
return function(lo, hi, xp, xo, top)
  for q = xo + lo, xo + hi - 1 do
    local at = xp[q]
    if at < 1 or at > top then error('outside', 0) end
  end
end]], { 'int64_t *', 'number', 'number' })
for name, body in pairs { avgForward = avgForward,
                          avgBackward = avgBackward } do
  loops[name] = apply.perType('pool ' .. name, (header:gsub('BODY', function() return body end)))
end

-- Adaptive pooling: output (oy, ox) of an H x W plane pools rows [floor(oy*H/oH),
-- ceil((oy+1)*H/oH)) and likewise columns (integer arithmetic; torch7 rounds in float).
local adaptive = [[
local floor, ceil, huge = math.floor, math.ceil, math.huge
return function(ip, io, op, oo, xp, xo, P, H, W, oH, oW, mode)
  for p = 0, P - 1 do
    local ib, ob = io + p * H * W, oo + p * oH * oW
    for oy = 0, oH - 1 do
      local y0, y1 = floor(oy * H / oH), ceil((oy + 1) * H / oH)
      for ox = 0, oW - 1 do
        local x0, x1 = floor(ox * W / oW), ceil((ox + 1) * W / oW)
        local o = ob + oy * oW + ox
        if mode == 'max' then
          local best, at = -huge, -1
          for y = y0, y1 - 1 do
            for x = x0, x1 - 1 do
              local v = ip[ib + y * W + x]
              if v > best then best, at = v, y * W + x end
            end
          end
          op[o], xp[xo + o - oo] = best, at + 1
        elseif mode == 'avg' then
          local s = 0
          for y = y0, y1 - 1 do
            for x = x0, x1 - 1 do s = s + ip[ib + y * W + x] end
          end
          op[o] = s / ((y1 - y0) * (x1 - x0))
        else   -- the average's backward pass: ip is gradInput, op gradOutput
          local g = op[o] / ((y1 - y0) * (x1 - x0))
          for y = y0, y1 - 1 do
            for x = x0, x1 - 1 do ip[ib + y * W + x] = ip[ib + y * W + x] + g end
          end
        end
      end
    end
  end
end]]
loops.adaptive = apply.perType('adaptive pooling', adaptive)

-- gi (zeroed) += each of the P planes of gradOutput's values at its index (loops.maxScatter)
local function scatter(gi, gradOutput, indices, P, plane, oplane)
  loops.maxScatter[gi._dt](gi._st._ptr, gi._off, gradOutput._st._ptr, gradOutput._off,
    indices._st._ptr, indices._off, P, plane, oplane)
end

local function run(f, a, b, x, g, countPad, divide)
  local I, O, p = g.I, g.O, g.p
  local k, d, pad, dil = p.k, p.d, p.pad, p.dil
  f(a._st._ptr, a._off, b._st._ptr, b._off, x and x._st._ptr, x and x._off or 0, g.P,
    I[1], I[2], I[3], O[1], O[2], O[3], k[1], k[2], k[3], d[1], d[2], d[3],
    pad[1], pad[2], pad[3], dil[1], dil[2], dil[3], countPad, divide)
end

-- Max unpooling: each of the P planes of n values goes to its 1-based index in an m-element
-- plane (forward), or reads its gradient back from there (backward).
loops.unpool = apply.perType('unpooling', [[
return function(small, so, big, bo, xp, xo, P, n, m, backward)
  for p = 0, P - 1 do
    for k = 0, n - 1 do
      local at = xp[xo + p * n + k]
      if at > 0 and at <= m then   -- indices is a public field: nothing outside the plane
        local q = bo + p * m + at - 1
        if backward then small[so + p * n + k] = big[q] else big[q] = small[so + p * n + k] end
      end
    end
  end
end]])

-- 2D windows wholly inside the plane (no padding, no dilation, no ceil overhang) of at most
-- 25 taps: loops generated per geometry, with the sizes as constants and each window unrolled,
-- and short output rows wholly unrolled (LeNet's 12- and 4-wide rows would otherwise run as
-- short inner loops, whose entry and exit cost more than their few windows).
-- Backward: every window is in the plane, so every index is valid and the gradient is added
-- without a test.

-- Code leaving in m the maximum of the window's taps (offsets from s + k0, in window order) and
-- in a k0 + 1 + the offset of its first occurrence (torch7 keeps the first maximum): its
-- 1-based index less the row's. The maximum is a tree of pairs (short dependency chains);
-- then each tap but the last gets n = 0 when it holds the maximum, else 1 (its difference to
-- it scaled past 1 by `big`: no data-dependent branch, which LuaJIT, having no conditional
-- move, would make a trace exit taken at random), and a is the first tap whose n is 0. A window
-- with an infinite or NaN tap takes a rarely taken branch instead, which finds the first tap
-- equal to the maximum, or the last NaN (torch7 lets a NaN win).
local function maxTree(taps, big, k0)
  local code, T = {}, #taps
  local function at(tap)   -- k0 + 1 + tap: a constant where k0 is one
    return type(k0) == 'number' and tostring(k0 + tap + 1) or ('(k0 + %d)'):format(tap + 1)
  end
  for t, tap in ipairs(taps) do code[t] = ('local v%d = s[k0 + %d]'):format(t, tap) end
  local function tree(lo, hi)
    if lo == hi then return 'v' .. lo end
    local mid = math.floor((lo + hi) / 2)
    return ('max(%s, %s)'):format(tree(lo, mid), tree(mid + 1, hi))
  end
  code[#code + 1] = 'local m = ' .. tree(1, T)
  local offset = tostring(taps[T] - (taps[T - 1] or 0))
  for t = T - 1, 1, -1 do
    code[#code + 1] = ('local n%d = min((m - v%d) * %s, 1)'):format(t, t, big)
    offset = t == T - 1 and ('n%d * %s'):format(t, offset)
      or ('n%d * (%d + %s)'):format(t, taps[t + 1] - taps[t], offset)
  end
  code[#code + 1] = ('local a = %s%s'):format(at(taps[1]), T > 1 and ' + ' .. offset or '')
  local exact = {}
  for t = T, 1, -1 do exact[#exact + 1] = ('if v%d == m then a = %s end'):format(t, at(taps[t])) end
  -- NaN taps: the last one wins (torch7's rule)
  local nans = {}
  for t = 1, T do nans[t] = ('if v%d ~= v%d then m, a = v%d, %s end'):format(t, t, t, at(taps[t])) end
  -- any infinite or NaN tap (their sum times 0 is not 0) takes the exact path: math.max and
  -- math.min give no NaN rule, so m and the n's are only trusted over finite taps
  local sum = {}
  for t = 1, T do sum[t] = 'v' .. t end
  code[#code + 1] = ('if (%s) * 0 ~= 0 then a = %s; %s %s end'):format(table.concat(sum, ' + '),
    at(taps[T]), table.concat(exact, ' '), table.concat(nans, ' '))
  return table.concat(code, ' ')
end

-- The code of window ox (a number, or 'ox' in a loop over the row) starting at s + k0 (its
-- offset in the plane: kr + k0). Pointers to the row (s, o, q) let LuaJIT fold the constant
-- offsets into the loads and stores.
-- Backward, when the windows tile the plane (`tiled`), each window is written whole (zeros and
-- its maximum's gradient): gradInput needs no zeroing pass, nor a read per window.
local function maxWindow(I, k, backward, ox, k0, tiled, big)
  local taps = {}
  for i = 0, k[2] - 1 do
    for j = 0, k[3] - 1 do taps[#taps + 1] = i * I[3] + j end
  end
  if backward and tiled then
    local zeros = {}
    for t, tap in ipairs(taps) do zeros[t] = ('s[%s + %d] = 0'):format(k0, tap) end
    return ('%s; at = q[%s]; g[at] = o[%s]'):format(table.concat(zeros, '; '), ox, ox)
  elseif backward then
    return ('at = q[%s]; g[at] = g[at] + o[%s]'):format(ox, ox)
  end
  return ('do local k0 = %s %s o[%s] = m; q[%s] = kr + a end'):format(k0, maxTree(taps, big, k0), ox, ox)
end

-- At most ROW_TAPS taps a step are unrolled (a longer trace is aborted by LuaJIT): as many
-- whole output rows as fit (LeNet's: one row of 12 windows, two of 4); wider rows loop over
-- their windows, each window unrolled.
local tiles   -- below: whether the unrolled windows tile each plane
local ROW_TAPS = 48
local unrolled = {}
local function unrolledMax(dt, g, backward)
  -- kept in g too: a memoized geometry then skips making the key
  local field = backward and 'maxBackwardLoop' or 'maxForwardLoop'
  local f = g[field]
  if f and g.loopType == dt then return f end   -- { the loop, the threaded one }
  local I, O, k, d = g.I, g.O, g.p.k, g.p.d
  local key = ('%s %s %d %d %d %d %d %d %d %d'):format(dt.name, backward and 'backward' or 'forward',
    I[2], I[3], O[2], O[3], k[2], k[3], d[2], d[3])
  if not unrolled[key] then
    local body, tiled = {}, tiles(g)
    -- scales any nonzero difference of two values of the type past 1 (a Float's are >= 2^-149)
    local big = dt.name == 'Float' and '1e300' or '1e300 * 1e300'
    local rowTaps, RY = k[2] * k[3] * O[3], 1
    if rowTaps <= ROW_TAPS then
      -- RY rows a step: the most that divide the output's height
      for r = 2, O[2] do
        if O[2] % r == 0 and r * rowTaps <= ROW_TAPS then RY = r end
      end
      for r = 0, RY - 1 do
        for ox = 0, O[3] - 1 do
          body[#body + 1] = maxWindow(I, k, backward, r * O[3] + ox, r * d[2] * I[3] + ox * d[3], tiled, big)
        end
      end
    else
      body[1] = ('for ox = 0, %d do %s end'):format(O[3] - 1,
        maxWindow(I, k, backward, 'ox', 'ox * ' .. d[3], tiled, big))
    end
    local code = ([[
local max, min = math.max, math.min
return function(ip, io, op, oo, xp, xo, P)
  for p = 0, P - 1 do
    local ib = io + p * PLANE
    for oy = 0, OH - 1, RY do
      local kr, oq = oy * ROWSTEP, (p * OH + oy) * OW
      -- row pointers, and g: gradInput at the 1-based indices (backward)
      local s, o, q, g, at = ip + (ib + kr), op + (oo + oq), xp + (xo + oq), ip + (ib - 1), nil
      BODY
    end
  end
end]]):gsub('%u%u+', { PLANE = I[2] * I[3], OH = O[2], OW = O[3], ROWSTEP = d[2] * I[3], RY = RY,
      BODY = table.concat(body, '\n      ') })
    -- the loop here, and the same code over chunks of planes on threads (parallel.lua)
    unrolled[key] = { apply.perType('unrolled max pooling ' .. key, code)[dt],
      parallel.loop('unrolled max pooling ' .. key, parallel.planes(code, 0), parallel.planesSignature(0))[dt] }
  end
  if g.loopType ~= dt then g.maxForwardLoop, g.maxBackwardLoop, g.loopType = nil, nil, dt end
  g[field] = unrolled[key]
  return unrolled[key]
end

-- The elements of each input plane and each output plane.
local function planeSizes(g)
  return g.I[1] * g.I[2] * g.I[3], g.O[1] * g.O[2] * g.O[3]
end

-- The thread count of a max pooling pass of `work` elements over g's planes on the threaded
-- loops (parallel.lua); nil where they are off (parallel.enabled false: the loops before them,
-- called as before) or the type is not Float or Double.
local function threadsFor(g, dt, work, least)
  if not parallel.enabled or (dt.name ~= 'Float' and dt.name ~= 'Double') then return nil end
  return math.min(parallel.threads(work, least or PLANE_LEAST), g.P)
end

local function unrolls(g)
  local I, O, p = g.I, g.O, g.p
  local k, d = p.k, p.d
  return I[1] == 1 and k[1] == 1 and k[2] * k[3] <= 25
    and p.pad[2] == 0 and p.pad[3] == 0 and p.dil[2] == 1 and p.dil[3] == 1
    and (O[2] - 1) * d[2] + k[2] <= I[2] and (O[3] - 1) * d[3] + k[3] <= I[3]
end

-- Whether each output row unrolls whole (unrolledMax's first case).
local function wholeRows(g)
  return g.p.k[2] * g.p.k[3] * g.O[3] <= ROW_TAPS
end

-- Whether the unrolled windows tile each plane: side by side (stride = kernel size) and
-- covering it (LeNet's 2x2 windows of 2).
function tiles(g)
  local I, O, k, d = g.I, g.O, g.p.k, g.p.d
  return unrolls(g) and d[2] == k[2] and d[3] == k[3] and O[2] * k[2] == I[2] and O[3] * k[3] == I[3]
end

-- The op table's pooling passes on the CPU (the CUDA ones: backend/cuda/nn_pool.lua), over
-- the P planes of nn/util/pool.lua's geometry g; operands contiguous and checked, results
-- sized. 2D max and average pooling of Float data run on oneDNN where it is installed
-- (dnnl_nn.lua), on all threads; max pooling's backward stays here (faster than oneDNN's on
-- every shape measured, see dnnl_nn.lua).
backend.register('cpu', {
  -- windows whose output rows unroll whole (LeNet's) run faster in their generated loops than on
  -- oneDNN, whose indices take a serial pass of their own (256x20x24x24 by 2x2: 2.6 ms against
  -- 2.9 on 1 thread and 2.8 on 2; 256x50x8x8: 0.7 against 1.1); wider rows the other way
  -- (64x64x32x32: 10.6 against 4.1)
  pool_max_forward = function(g, output, indices, input)
    if not (unrolls(g) and wholeRows(g)) and convdnnl.maxPool(g, output, indices, input) then return end
    local n = threadsFor(g, input._dt, g.P * g.I[1] * g.I[2] * g.I[3])
    local ip, io, op, oo, xp, xo = input._st._ptr, input._off, output._st._ptr, output._off, indices._st._ptr, indices._off
    if unrolls(g) then
      local loop = unrolledMax(input._dt, g, false)
      if n then loop[2](n, g.P, ip, io, op, oo, xp, xo, planeSizes(g))
      else loop[1](ip, io, op, oo, xp, xo, g.P) end
    elseif n then
      local I, O, p = g.I, g.O, g.p
      local k, d, pad, dil = p.k, p.d, p.pad, p.dil
      local plane, oplane = planeSizes(g)
      threaded.maxForward[input._dt](n, g.P, ip, io, op, oo, xp, xo, plane, oplane,
        I[1], I[2], I[3], O[1], O[2], O[3], k[1], k[2], k[3], d[1], d[2], d[3],
        pad[1], pad[2], pad[3], dil[1], dil[2], dil[3])
    else
      run(loops.maxForward[input._dt], input, output, indices, g)
    end
  end,
  -- the unrolled windows only on planes of at most 64 elements (LeNet's second pooling, 0.54 ms
  -- against 0.83 at batch 256); on larger ones the scatter is faster (VGG's 32x32 planes: 3.5 ms
  -- against 97, LeNet's 24x24: 3.3 against 7.6)
  pool_max_backward = function(g, gradInput, gradOutput, indices)
    local gi = gradInput
    local plane, oplane = planeSizes(g)
    local unrolled = unrolls(g) and g.I[2] * g.I[3] <= 64
    local n = threadsFor(g, gi._dt, g.P * plane, unrolled and UNROLLED_BACK_LEAST or nil)
    local ip, io, op, oo, xp, xo = gi._st._ptr, gi._off, gradOutput._st._ptr, gradOutput._off, indices._st._ptr, indices._off
    if unrolled then
      if not tiles(g) then unfold.zero(gi) end
      local loop = unrolledMax(gi._dt, g, true)
      if n then loop[2](n, g.P, ip, io, op, oo, xp, xo, plane, oplane)
      else loop[1](ip, io, op, oo, xp, xo, g.P) end
    elseif n then
      -- each plane zeroed, then its gradient added, by the thread that has the plane
      threaded.maxScatter[gi._dt](n, g.P, ip, io, op, oo, xp, xo, plane, oplane, plane, oplane, gi._dt.size)
    else
      unfold.zero(gi)
      scatter(gi, gradOutput, indices, g.P, plane, oplane)
    end
  end,
  -- whether the indices (torch7's, of max pooling; the front end's check before the backward
  -- pass reads them) are all in 1..plane: one pass over them on the threaded loops, else
  -- their min and max (parallel.enabled false, or not a contiguous LongTensor)
  pool_max_indices_ok = function(indices, plane)
    local n = indices:nElement()
    if n == 0 then return true end
    if not parallel.enabled or torch.type(indices) ~= 'torch.LongTensor' or not indices:isContiguous() then
      return indices:min() >= 1 and indices:max() <= plane
    end
    local threads = parallel.threads(n, 2 * PLANE_LEAST)
    return (pcall(indicesIn[indices._dt], threads, n, indices._st._ptr, indices._off, plane))
  end,
  pool_avg_forward = function(g, output, input, countPad, divide)
    if convdnnl.avgPool(g, output, input, countPad, divide) then return end
    run(loops.avgForward[input._dt], input, output, nil, g, countPad, divide)
  end,
  pool_avg_backward = function(g, gradInput, gradOutput, countPad, divide)
    if convdnnl.avgPoolBackward(g, gradInput, gradOutput, countPad, divide) then return end
    unfold.zero(gradInput)
    run(loops.avgBackward[gradInput._dt], gradInput, gradOutput, nil, g, countPad, divide)
  end,
})


-- The planes of a contiguous (B x) C x H x W tensor: their count, height and width.
local function planesOf(t)
  local sz = t._sz
  local nd = #sz
  return nd == 4 and sz[1] * sz[2] or sz[1], sz[nd - 1], sz[nd]
end

-- Adaptive pooling (SpatialAdaptiveMaxPooling, SpatialAdaptiveAveragePooling) of contiguous
-- (B x) C x H x W input to oH x oW planes, and max unpooling (SpatialMaxUnpooling).
backend.register('cpu', {
  adaptive_max_forward = function(output, indices, input, oH, oW)
    local P, H, W = planesOf(input)
    loops.adaptive[input._dt](input._st._ptr, input._off, output._st._ptr, output._off,
      indices._st._ptr, indices._off, P, H, W, oH, oW, 'max')
  end,
  -- indices: 1-based offsets in the planes (as max pooling's)
  adaptive_max_backward = function(gradInput, gradOutput, indices)
    local P, H, W = planesOf(gradInput)
    local _, oH, oW = planesOf(gradOutput)
    unfold.zero(gradInput)
    scatter(gradInput, gradOutput, indices, P, H * W, oH * oW)
  end,
  adaptive_avg_forward = function(output, input, oH, oW)
    local P, H, W = planesOf(input)
    loops.adaptive[input._dt](input._st._ptr, input._off, output._st._ptr, output._off,
      output._st._ptr, output._off, P, H, W, oH, oW, 'avg')
  end,
  adaptive_avg_backward = function(gradInput, gradOutput, oH, oW)
    local P, H, W = planesOf(gradInput)
    unfold.zero(gradInput)
    loops.adaptive[gradInput._dt](gradInput._st._ptr, gradInput._off, gradOutput._st._ptr, gradOutput._off,
      nil, 0, P, H, W, oH, oW, 'avgBackward')
  end,
  -- small (P x n, contiguous), big (P x m, contiguous), indices (P x n): each of the P planes
  -- of n values goes to its 1-based index in an m-element plane (backward: reads its gradient
  -- back from there)
  max_unpool = function(small, big, indices, P, n, m, backward)
    indices = torch.type(indices) == 'torch.LongTensor' and indices:contiguous() or indices:long()
    if not backward then unfold.zero(big) else unfold.zero(small) end
    loops.unpool[small._dt](small._st._ptr, small._off, big._st._ptr, big._off, indices._st._ptr,
      indices._off, P, n, m, backward)
  end,
})
