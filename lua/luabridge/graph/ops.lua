-- Compute closures for the graph executor's tensor ops (luabridge/graph/ops/*.py).
--
-- A factory runs once per executor build and captures the planned buffers (and for tiny ones
-- their element pointers), so a run costs little: straight-line code for tiny tensors (no loop
-- to trace, no call), else one call of the operands' op table (torch.backend: the tensor library's
-- own elementwise path, numpy's SIMD loops or LuaJIT kernels; gemm for matrix products).
-- Generated code is cached by its text, so every node of one kind and size shares one prototype
-- (LuaJIT traces a run loop over such closures as one). Operands on a device or not contiguous
-- take torch methods.
local ffi = require 'ffi'
local torch = require 'torch'
local backend = require 'torch.backend'
local byTensorType = require('torch.core.dtype').byTensorType

local K = {}
-- Straight-line code up to these sizes (measured against the backend's ops called as here):
K.UNROLL = 8           -- elements of an elementwise op
K.REDUCE_UNROLL = 16   -- elements of a full reduction
K.MATMUL_UNROLL = 64   -- multiply-adds of a matrix product

local structure = require 'torch.core.apply'
local isContiguous, numel = structure.isContiguous, structure.numel

-- The pointer to the first element of a direct operand (host memory), from its op table.
local function ptr(t) return backend.of(t).ptr(t) end

-- Whether generated loops and the ops may address t directly (host memory, contiguous).
local function direct(t)
  return backend.onHost(t) and t:storage() ~= nil and isContiguous(t)
end

local function noop() end

-- Buffers that a closure reaches only through captured pointers, kept alive with it.
local anchors = setmetatable({}, { __mode = 'k' })
local function anchored(f, ...)
  anchors[f] = { ... }
  return f
end

local compiled = {}
-- The function that chunk `src` returns, compiled once per text.
local function compile(src, name)
  local f = compiled[src]
  if not f then
    f = assert(loadstring(src, '=' .. name))()
    compiled[src] = f
  end
  return f
end

------------------------------------------------------------------------------------------------
-- elementwise ops: y = f(x1, x2, v); an input of one element broadcasts over y ([1]-shaped
-- operands, tinyflow's scalars)

-- a broadcast operand as a number (a or b, never both) for the backend's number forms
local function commute(run)
  return function(o, y, a, b) if type(a) == 'number' then a, b = b, a end run(o, y, a, b) end
end

-- name -> { expression over $1, $2 and the scalar v (straight-line code);
--           ops form (o, y, a, b, v): the backend's ops o, a / b a tensor or, broadcast, a number;
--           torch form (y, a, b, v) for device or strided operands }
local EWISE = {
  add = { '$1 + $2', commute(function(o, y, a, b) o.binary('add', y, a, b) end),
          function(y, a, b) y:add(a, b) end },
  sub = { '$1 - $2', function(o, y, a, b)
            if type(a) == 'number' then o.unary('neg', y, b); o.binary('add', y, y, a)
            elseif type(b) == 'number' then o.binary('add', y, a, -b)
            else o.binary('sub', y, a, b) end
          end, function(y, a, b) torch.add(y, a, -1, b) end },
  mul = { '$1 * $2', commute(function(o, y, a, b) o.binary('mul', y, a, b) end),
          function(y, a, b) y:cmul(a, b) end },
  div = { '$1 / $2', function(o, y, a, b)
            if type(a) == 'number' then o.unary('cinv', y, b); o.binary('mul', y, y, a)
            else o.binary('div', y, a, b) end
          end, function(y, a, b) y:cdiv(a, b) end },
  pow = { '$1 ^ $2', function(o, y, a, b)
            if type(a) == 'number' then o.binary('tpow', y, b, a) else o.binary('pow', y, a, b) end
          end, function(y, a, b) y:cpow(a, b) end },
  equal = { '($1 == $2) and 1 or 0', commute(function(o, y, a, b) o.binary('eq', y, a, b) end),
            function(y, a, b) y:copy(torch.eq(a, b)) end },
  add_scalar = { '$1 + v', function(o, y, a, _, v) o.binary('add', y, a, v) end,
                 function(y, a, _, v) y:add(a, v) end },
  sub_scalar = { '$1 - v', function(o, y, a, _, v) o.binary('add', y, a, -v) end,
                 function(y, a, _, v) y:add(a, -v) end },
  rsub_scalar = { 'v - $1', function(o, y, a, _, v) o.unary('neg', y, a); o.binary('add', y, y, v) end,
                  function(y, a, _, v) y:mul(a, -1):add(v) end },
  mul_scalar = { '$1 * v', function(o, y, a, _, v) o.binary('mul', y, a, v) end,
                 function(y, a, _, v) y:mul(a, v) end },
  div_scalar = { '$1 / v', function(o, y, a, _, v) o.binary('div', y, a, v) end,
                 function(y, a, _, v) y:div(a, v) end },
  rdiv_scalar = { 'v / $1', function(o, y, a, _, v) o.unary('cinv', y, a); o.binary('mul', y, y, v) end,
                  function(y, a, _, v) y:pow(a, -1):mul(v) end },
  pow_scalar = { '$1 ^ v', function(o, y, a, _, v) o.binary('pow', y, a, v) end,
                 function(y, a, _, v) y:pow(a, v) end },
  rpow_scalar = { 'v ^ $1', function(o, y, a, _, v) o.binary('tpow', y, a, v) end,
                  function(y, a, _, v) torch.pow(y, v, a) end },
  square = { '$1 * $1', function(o, y, a) o.binary('pow', y, a, 2) end, function(y, a) y:cmul(a, a) end },
  exp = { 'exp($1)', function(o, y, a) o.unary('exp', y, a) end, function(y, a) y:exp(a) end },
  log = { 'log($1)', function(o, y, a) o.unary('log', y, a) end, function(y, a) y:log(a) end },
  sqrt = { 'sqrt($1)', function(o, y, a) o.unary('sqrt', y, a) end, function(y, a) y:sqrt(a) end },
  copy = { '$1', function(o, y, a) o.copy(y, a) end, function(y, a) y:copy(a) end },
  fill = { 'v', function(o, y, _, _, v) o.fill(y, v) end, function(y, _, _, v) y:fill(v) end },
}
K.EWISE = EWISE

-- Source of a factory (py, p1, p2, v) -> closure over n elements, written out;
-- bcast[k]: input k broadcasts (index 0).
local function ewiseSource(expr, bcast, n)
  local lines = {}
  for i = 0, n - 1 do
    lines[#lines + 1] = ('py[%d] = %s'):format(i, (expr:gsub('%$(%d)', function(k)
      return ('p%s[%d]'):format(k, bcast[tonumber(k)] and 0 or i)
    end)))
  end
  return ([[
local exp, log, sqrt = math.exp, math.log, math.sqrt
return function(py, p1, p2, v)
  return function()
%s
  end
end]]):format(table.concat(lines, '\n'))
end

-- v as an element of t's type holds it (the ops take numbers so cast, as torch7's `real`s)
local function asElement(t, v)
  if v == nil then return nil end
  return tonumber(ffi.new(byTensorType[torch.typename(t)].ctype .. '[1]', v)[0])
end

-- The closure running the ops form of op over direct operands; a broadcast input is read as
-- a number (an element already) on every run.
local function opsClosure(op, y, xs, v, n)
  local run, a, b, ops = op[2], xs[1], xs[2], backend.of(y)
  v = asElement(y, v)
  local pa = a and numel(a) == 1 and n > 1 and ptr(a)
  local pb = b and numel(b) == 1 and n > 1 and ptr(b)
  if pa and (pb or not b) then
    -- nothing but numbers in: y takes the first, then the op runs on y in place
    return function()
      ops.fill(y, tonumber(pa[0]))
      run(ops, y, y, pb and tonumber(pb[0]) or nil, v)
    end
  end
  if pa then return function() run(ops, y, tonumber(pa[0]), b, v) end end
  if pb then return function() run(ops, y, a, tonumber(pb[0]), v) end end
  return function() run(ops, y, a, b, v) end
end

-- The closure computing y = op(xs[1], xs[2], v) (op: a name of EWISE).
function K.ewise(name, y, xs, v)
  local op = assert(EWISE[name], name)
  local n = numel(y)
  for _, x in ipairs(xs) do
    local m = numel(x)
    if m ~= n and m ~= 1 then
      error(('%s: %d elements and output of %d'):format(name, m, n))
    end
  end
  if n == 0 then return noop end
  local fast = direct(y)
  for _, x in ipairs(xs) do fast = fast and direct(x) end
  if not fast then
    local ones = y:size():fill(1)
    local a, b = xs[1], xs[2]
    if a and numel(a) ~= n then a = a:view(ones):expandAs(y) end
    if b and numel(b) ~= n then b = b:view(ones):expandAs(y) end
    local f = op[3]
    return function() f(y, a, b, v) end
  end
  if name == 'copy' and ptr(y) == ptr(xs[1]) then return noop end
  if n > K.UNROLL then return opsClosure(op, y, xs, v, n) end
  local bcast = {}
  for k, x in ipairs(xs) do bcast[k] = n > 1 and numel(x) == 1 end
  local factory = compile(ewiseSource(op[1], bcast, n), 'graph ' .. name)
  return factory(ptr(y), xs[1] and ptr(xs[1]), xs[2] and ptr(xs[2]), v)
end

-- y = x1 + ... + xk (the sum of gradients)
function K.sum(y, xs)
  if #xs == 1 then return K.ewise('copy', y, xs) end
  local steps = { K.ewise('add', y, { xs[1], xs[2] }) }
  for k = 3, #xs do steps[#steps + 1] = K.ewise('add', y, { y, xs[k] }) end
  if #steps == 1 then return steps[1] end
  return function() for k = 1, #steps do steps[k]() end end
end

------------------------------------------------------------------------------------------------
-- reductions over axes: passes of (outer, red, inner) over contiguous buffers

-- The shape of x as groups { size, reduced } with neighbours of one kind merged.
local function groups(sz, axes)
  local red = {}
  for _, a in ipairs(axes) do red[a + 1] = true end
  local gs = {}
  for d = 1, #sz do
    local r = red[d] or false
    local last = gs[#gs]
    if last and last[2] == r then last[1] = last[1] * sz[d] else gs[#gs + 1] = { sz[d], r } end
  end
  return gs
end

-- The passes reducing groups gs, last reduced group first: { outer, red, inner } each.
local function reducePasses(gs)
  gs = { unpack(gs) }
  local passes = {}
  while true do
    local j
    for k = #gs, 1, -1 do if gs[k][2] then j = k; break end end
    if not j then return passes end
    local outer, inner = 1, 1
    for k = 1, j - 1 do outer = outer * gs[k][1] end
    for k = j + 1, #gs do inner = inner * gs[k][1] end
    passes[#passes + 1] = { outer, gs[j][1], inner }
    table.remove(gs, j)
    if gs[j - 1] and gs[j] and not gs[j - 1][2] and not gs[j][2] then
      gs[j - 1] = { gs[j - 1][1] * gs[j][1], false }
      table.remove(gs, j)
    end
  end
end

local REDUCE = [[
local ffi = require 'ffi'
return function(outer, red, inner, px, py, scale)
  if inner == 1 then
    return function()
      for o = 0, outer - 1 do
        local s, base = 0, o * red
        for r = 0, red - 1 do s = s + px[base + r] end
        py[o] = s * scale
      end
    end
  end
  local acc = ffi.new('double[?]', inner)
  return function()
    for o = 0, outer - 1 do
      for i = 0, inner - 1 do acc[i] = 0 end
      for r = 0, red - 1 do
        local base = (o * red + r) * inner
        for i = 0, inner - 1 do acc[i] = acc[i] + px[base + i] end
      end
      local base = o * inner
      for i = 0, inner - 1 do py[base + i] = acc[i] * scale end
    end
  end
end]]

-- A full reduction of n elements, unrolled for small n.
local function reduceAllSource(n)
  local terms = {}
  for i = 0, n - 1 do terms[#terms + 1] = ('px[%d]'):format(i) end
  return ([[
return function(px, py, scale)
  return function() py[0] = (%s) * scale end
end]]):format(table.concat(terms, ' + '))
end

local reduceLoop = assert(loadstring(REDUCE, '=graph reduce'))()

-- One pass py[o, i] = scale * sum_r px[o, r, i].
local function reducePass(p, px, py, scale)
  local outer, red, inner = p[1], p[2], p[3]
  if outer * inner == 1 and red <= K.REDUCE_UNROLL then
    return compile(reduceAllSource(red), 'graph reduce ' .. red)(px, py, scale)
  end
  return reduceLoop(outer, red, inner, px, py, scale)
end

local function chain(steps)
  if #steps == 1 then return steps[1] end
  local a, b = steps[1], steps[2]
  if #steps == 2 then return function() a(); b() end end
  return function() for k = 1, #steps do steps[k]() end end
end

-- An attribute's text as a boolean, with the spellings registry.parse_bool takes.
function K.flag(text)
  local v = text and text:lower():match('^%s*(.-)%s*$')
  return v == 'true' or v == '1'
end

-- The 0-based axes in attribute text such as "[1,3]" or "-1" (negative ones count from the
-- end of ndim dims), sorted; nil when there are none (every axis).
function K.axes(text, ndim)
  if text == nil then return nil end
  local axes = {}
  for a in tostring(text):gmatch('-?%d+') do
    a = tonumber(a)
    axes[#axes + 1] = a < 0 and a + ndim or a
  end
  table.sort(axes)
  return #axes > 0 and axes or nil
end

-- Axes as given (0-based, a Lua list) or every axis when nil or empty.
local function axesOf(x, axes)
  if axes and #axes > 0 then return axes end
  local all = {}
  for d = 1, x:dim() do all[d] = d - 1 end
  return all
end

-- Reduced element count of x over axes.
local function reducedCount(x, axes)
  local c = 1
  for _, a in ipairs(axes) do c = c * x:size(a + 1) end
  return c
end

-- y = sum (mean: the mean) of x over axes (0-based), the reduced dims dropped.
function K.reduce(kind, y, x, axes)
  axes = axesOf(x, axes)
  local scale = kind == 'mean' and 1 / reducedCount(x, axes) or 1
  if numel(y) == 0 then return noop end
  if numel(x) == 0 then return K.ewise('fill', y, {}, kind == 'mean' and 0 / 0 or 0) end
  if not (direct(x) and direct(y)) then
    local keep = x:size()
    for _, a in ipairs(axes) do keep[a + 1] = 1 end
    local yv = y:view(keep)
    table.sort(axes)
    return function()
      local t = x
      for k = #axes, 1, -1 do t = t:sum(axes[k] + 1) end
      yv:copy(t):mul(scale)
    end
  end
  local passes = reducePasses(groups(x:size():totable(), axes))
  local steps, temps, src = {}, {}, ptr(x)
  for k, p in ipairs(passes) do
    local last = k == #passes
    if not last then temps[k] = x.new():resize(p[1] * p[3]) end
    local dst = last and ptr(y) or ptr(temps[k])
    steps[k] = reducePass(p, src, dst, last and scale or 1)
    src = dst
  end
  return anchored(chain(steps), temps)
end

local BROADCAST = [[
return function(outer, red, inner, px, py, scale)
  return function()
    for o = 0, outer - 1 do
      for r = 0, red - 1 do
        local src, dst = o * inner, (o * red + r) * inner
        for i = 0, inner - 1 do py[dst + i] = px[src + i] * scale end
      end
    end
  end
end]]
local broadcastLoop = assert(loadstring(BROADCAST, '=graph broadcast'))()

-- The gradient of K.reduce: y (x's shape) = g (the reduced shape) broadcast over axes, scaled
-- by 1 / count for a mean.
function K.reduceBackward(kind, y, g, axes)
  axes = axesOf(y, axes)
  local scale = kind == 'mean' and 1 / reducedCount(y, axes) or 1
  if numel(y) == 0 then return noop end
  if not (direct(y) and direct(g)) then
    local keep = y:size()
    for _, a in ipairs(axes) do keep[a + 1] = 1 end
    local gv = g:view(keep):expandAs(y)
    return function() y:copy(gv):mul(scale) end
  end
  local passes = reducePasses(groups(y:size():totable(), axes))
  local steps, dst = {}, ptr(y)
  -- the reduction's first pass is the broadcast's last: walk them backwards from y
  local temps, bufs = {}, {}
  for k = 1, #passes - 1 do
    temps[k] = y.new():resize(passes[k][1] * passes[k][3])
    bufs[k] = ptr(temps[k])
  end
  for k = #passes, 1, -1 do
    local src = k == #passes and ptr(g) or bufs[k]
    local out = k == 1 and dst or bufs[k - 1]
    steps[#steps + 1] = broadcastLoop(passes[k][1], passes[k][2], passes[k][3], src, out,
      k == #passes and scale or 1)
  end
  return anchored(chain(steps), temps)
end

local ARGMAX = [[
return function(outer, red, inner, px, py)
  return function()
    for o = 0, outer - 1 do
      for i = 0, inner - 1 do
        local base = o * red * inner + i
        local best, at = px[base], 0
        if best == best then
          for r = 1, red - 1 do
            local v = px[base + r * inner]
            if v ~= v then at = r; break end
            if v > best then best, at = v, r end
          end
        end
        py[o * inner + i] = at
      end
    end
  end
end]]
local argmaxLoop = assert(loadstring(ARGMAX, '=graph argmax'))()

-- y = the 0-based index of the largest element of x along axis (the first one; a NaN wins,
-- as numpy's argmax), as y's element type.
function K.argmax(y, x, axis)
  local sz = x:size():totable()
  local outer, inner = 1, 1
  for d = 1, axis do outer = outer * sz[d] end
  for d = axis + 2, #sz do inner = inner * sz[d] end
  local red = sz[axis + 1]
  if numel(y) == 0 then return noop end
  if red == 0 then error('argmax: empty axis ' .. axis) end
  if not (direct(x) and direct(y)) then
    local keep = x:size()
    keep[axis + 1] = 1
    local yv = y:view(keep)
    return function()
      local _, at = torch.max(x, axis + 1)
      yv:copy(at):add(-1)
    end
  end
  return argmaxLoop(outer, red, inner, ptr(x), ptr(y))
end

------------------------------------------------------------------------------------------------
-- matrix products: c (m x n) = op(a) op(b), row-major; ta / tb: a is stored k x m / b n x k

local function gemmSource(m, n, k, ta, tb)
  local lines = {}
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local terms = {}
      for l = 0, k - 1 do
        local ai = ta and (l * m + i) or (i * k + l)
        local bi = tb and (j * k + l) or (l * n + j)
        terms[#terms + 1] = ('pa[%d] * pb[%d]'):format(ai, bi)
      end
      lines[#lines + 1] = ('pc[%d] = %s'):format(i * n + j, table.concat(terms, ' + '))
    end
  end
  return ('return function(pc, pa, pb) return function()\n%s\nend end'):format(table.concat(lines, '\n'))
end

local floating = { ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true }

function K.matmul(c, a, b, ta, tb)
  local m, n = c:size(1), c:size(2)
  local k = ta and a:size(1) or a:size(2)
  if m * n == 0 then return noop end
  if k == 0 then return K.ewise('fill', c, {}, 0) end
  local a_ = ta and a:t() or a
  local b_ = tb and b:t() or b
  if not (floating[torch.typename(c)] and direct(a) and direct(b) and direct(c)) then
    return function() torch.mm(c, a_, b_) end
  end
  if m * n * k <= K.MATMUL_UNROLL then
    return compile(gemmSource(m, n, k, ta, tb), 'graph matmul')(ptr(c), ptr(a), ptr(b))
  end
  local ops = backend.of(c)
  return function() ops.gemm(c, 0, c, 1, a_, b_) end
end

-- The gradients ga, gb of c = op(a) op(b) (ta, tb: a, b transposed) from gc.
function K.matmulBackward(ga, gb, gc, a, b, ta, tb)
  -- grad op(a) = gc op(b)^T, grad op(b) = op(a)^T gc; a transposed operand takes its transpose
  local fa = ta and K.matmul(ga, b, gc, tb, true) or K.matmul(ga, gc, b, false, not tb)
  local fb = tb and K.matmul(gb, gc, a, true, ta) or K.matmul(gb, a, gc, not ta, false)
  return function() fa(); fb() end
end

------------------------------------------------------------------------------------------------
-- the rest

-- y = g summed down to y's element count: a copy, or the sum of every element when y has one
-- (the gradient of an operand that a binary op broadcast).
function K.sumTo(y, g)
  if numel(y) == numel(g) then return K.ewise('copy', y, { g }) end
  if numel(y) ~= 1 then error(('sum_to_like: %d elements into %d'):format(numel(g), numel(y))) end
  return K.reduce('sum', y:view(1), g, nil)
end

-- y = x summed along nn.SoftMax's class dim (1-D and 3-D: the first, 2-D and 4-D: the second),
-- broadcast back to x's shape (softmax's second derivative).
local CLASS_DIM = { 1, 2, 1, 2 }
function K.classSum(y, x)
  local dim = CLASS_DIM[x:dim()]
  if not dim then error(('_class_sum: 1D to 4D tensor expected, got %dD'):format(x:dim()), 0) end
  local sum = x.new()
  return function()
    torch.sum(sum, x, dim)
    y:copy(sum:expandAs(y))
  end
end

-- y = normal(mean, stdev) samples from torch's generator.
function K.normal(y, mean, stdev)
  return function() y:normal(mean, stdev) end
end

return K
