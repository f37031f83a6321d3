-- Elementwise loops over strided tensors, generated per kernel body and element types.
--
-- A body names tensor elements $1..$n and scalars v1..v3, e.g. '$1 = $2 + v1 * $3'.
-- All-contiguous operands get one flat loop; otherwise the dims that every operand can walk
-- as one are merged and the innermost dim runs as a tight strided loop.
local core = require 'torch.core.apply'
local apply = {}

local function source(n, body)
  local args, ptrs, incs, starts, steps = {}, {}, {}, {}, {}
  for k = 1, n do
    args[#args + 1] = ('p%d, s%d'):format(k, k)
    ptrs[#ptrs + 1] = 'p' .. k
    incs[#incs + 1] = ('local d%d = s%d[nd]'):format(k, k)
    starts[#starts + 1] = ('local q%d = o%d'):format(k, k)
    steps[#steps + 1] = ('q%d = q%d + d%d'):format(k, k, k)
  end
  local flat = body:gsub('%$(%d)', 'p%1[i]')
  local strided = body:gsub('%$(%d)', 'p%1[q%1]')
  local zero, adv, back = {}, {}, {}
  for k = 1, n do
    zero[#zero + 1] = ('local o%d = 0'):format(k)
    adv[#adv + 1] = ('o%d = o%d + s%d[d]'):format(k, k, k)
    back[#back + 1] = ('o%d = o%d - s%d[d] * (sz[d] - 1)'):format(k, k, k)
  end
  return ([[
return function(nd, sz, %s, v1, v2, v3)
  if sz == nil then
    for i = 0, nd - 1 do %s end
    return
  end
  local m = sz[nd]
  %s
  %s
  local cnt = {}
  for d = 1, nd do cnt[d] = 0 end
  while true do
    %s
    for _ = 1, m do %s; %s end
    local d = nd - 1
    while d > 0 do
      local c = cnt[d] + 1
      if c < sz[d] then cnt[d] = c; %s; break end
      cnt[d] = 0; %s
      d = d - 1
    end
    if d == 0 then return end
  end
end]]):format(table.concat(args, ', '), flat, table.concat(incs, '; '), table.concat(zero, '; '),
    table.concat(starts, '; '), strided, table.concat(steps, '; '), table.concat(adv, '; '),
    table.concat(back, '; '))
end

local function compile(n, body)
  local chunk, err = loadstring(source(n, body), '=kernel(' .. body .. ')')
  if not chunk then error('bad kernel body ' .. body .. ': ' .. err) end
  return chunk()
end

local isContiguous = core.isContiguous
local numel = core.numel
local sameSizes = core.sameSizes
local contiguousStrides = core.contiguousStrides
apply.isContiguous, apply.numel, apply.sameSizes = isContiguous, numel, sameSizes
apply.slices, apply.each = core.slices, core.each

-- Merges neighbouring dims that every operand walks with one stride; drops size-1 dims.
local function collapse(sz, strides, n)
  local osz, ost = {}, {}
  for k = 1, n do ost[k] = {} end
  for d = 1, #sz do
    if sz[d] ~= 1 then
      local m = #osz
      local merge = m > 0
      if merge then
        for k = 1, n do
          if ost[k][m] ~= strides[k][d] * sz[d] then merge = false; break end
        end
      end
      if merge then
        osz[m] = osz[m] * sz[d]
        for k = 1, n do ost[k][m] = strides[k][d] end
      else
        osz[m + 1] = sz[d]
        for k = 1, n do ost[k][m + 1] = strides[k][d] end
      end
    end
  end
  if #osz == 0 then
    osz[1] = 1
    for k = 1, n do ost[k][1] = 1 end
  end
  return osz, ost
end

local function ptrOf(t) return t._st._ptr + t._off end

-- Runs f over tensors ts[1..n] (same element count) in row-major order of each.
local function general(f, n, ts, v1, v2, v3)
  -- the walk shape is that of the first non-contiguous operand
  local shape
  for k = 1, n do
    if not isContiguous(ts[k]) then shape = ts[k]._sz; break end
  end
  local strides, ptrs = {}, {}
  for k = 1, n do
    local t = ts[k]
    if sameSizes(t, { _sz = shape }) then
      strides[k] = t._str
    elseif isContiguous(t) then
      strides[k] = contiguousStrides(shape)
    else
      -- a non-contiguous input of another shape walks through a contiguous copy
      -- (the output, operand 1, is never in this case: its shape is the walk shape or it is contiguous)
      t = t:contiguous()
      strides[k] = contiguousStrides(shape)
    end
    ptrs[k] = ptrOf(t)
  end
  local sz, st = collapse(shape, strides, n)
  if n == 1 then f(#sz, sz, ptrs[1], st[1], v1, v2, v3)
  elseif n == 2 then f(#sz, sz, ptrs[1], st[1], ptrs[2], st[2], v1, v2, v3)
  elseif n == 3 then f(#sz, sz, ptrs[1], st[1], ptrs[2], st[2], ptrs[3], st[3], v1, v2, v3)
  else f(#sz, sz, ptrs[1], st[1], ptrs[2], st[2], ptrs[3], st[3], ptrs[4], st[4], v1, v2, v3) end
end

-- A runner for an n-operand kernel: run(t1, ..., tn, v1, v2, v3). Operands must already be
-- checked (same element count; element types as the body expects).
function apply.kernel(n, body)
  local byTypes = {}
  local function get(key)
    local f = byTypes[key]
    if not f then f = compile(n, body); byTypes[key] = f end
    return f
  end
  if n == 1 then
    return function(a, v1, v2, v3)
      local cnt = numel(a)
      if cnt == 0 then return end
      local f = get(a._dt.id)
      if isContiguous(a) then return f(cnt, nil, ptrOf(a), nil, v1, v2, v3) end
      general(f, 1, { a }, v1, v2, v3)
    end
  elseif n == 2 then
    return function(a, b, v1, v2, v3)
      local cnt = numel(a)
      if cnt == 0 then return end
      local f = get(a._dt.id * 16 + b._dt.id)
      if isContiguous(a) and isContiguous(b) then
        return f(cnt, nil, ptrOf(a), nil, ptrOf(b), nil, v1, v2, v3)
      end
      general(f, 2, { a, b }, v1, v2, v3)
    end
  elseif n == 3 then
    return function(a, b, c, v1, v2, v3)
      local cnt = numel(a)
      if cnt == 0 then return end
      local f = get((a._dt.id * 16 + b._dt.id) * 16 + c._dt.id)
      if isContiguous(a) and isContiguous(b) and isContiguous(c) then
        return f(cnt, nil, ptrOf(a), nil, ptrOf(b), nil, ptrOf(c), nil, v1, v2, v3)
      end
      general(f, 3, { a, b, c }, v1, v2, v3)
    end
  elseif n == 4 then
    return function(a, b, c, e, v1, v2, v3)
      local cnt = numel(a)
      if cnt == 0 then return end
      local f = get(((a._dt.id * 16 + b._dt.id) * 16 + c._dt.id) * 16 + e._dt.id)
      if isContiguous(a) and isContiguous(b) and isContiguous(c) and isContiguous(e) then
        return f(cnt, nil, ptrOf(a), nil, ptrOf(b), nil, ptrOf(c), nil, ptrOf(e), nil, v1, v2, v3)
      end
      general(f, 4, { a, b, c, e }, v1, v2, v3)
    end
  end
  error('apply.kernel: 1 to 4 operands')
end

-- Loops written by hand (matrix products, convolutions): loops[dt] compiles `source` (a chunk
-- returning the loop function) once per element type, so each type traces on its own.
function apply.perType(name, source)
  return setmetatable({}, { __index = function(loops, dt)
    local f = assert(loadstring(source, '=' .. name .. ' loop (' .. dt.name .. ')'))()
    loops[dt] = f
    return f
  end })
end

apply.contiguousStrides = contiguousStrides
apply.ptr = ptrOf   -- the pointer to t's first element

-- The kernel builders, for code outside the tensor library (nn's kernels, the executor's
-- closures) that compiles its own loops over CPU tensors: it reaches them through the op table.
require('torch.backend').register('cpu', {
  kernel = apply.kernel, perType = apply.perType, slices = apply.slices, each = apply.each,
  ptr = ptrOf, numel = numel, isContiguous = apply.isContiguous, sameSizes = sameSizes,
})
return apply
