-- Fused elementwise chains (issue 25's whole-model plans): a chain of elementwise modules
-- (an LSTM's gates: Sigmoid, Tanh, CMulTable, CAddTable, ...) compiled once into one Lua
-- function that runs every pass of the chain as numpy's SIMD loops on the tensors' memory, with
-- no module call, check or allocation on the way. lua/nngraph/plan.lua describes a chain as a
-- program over slots (tensors); this file compiles it for the layouts the slots have now:
--
--   chain_compile(prog, T) -> run(T) or nil (nil: a slot or op this compiler does not take)
--     prog = { nslots = S, ops = { {name, out, a, b, c}, ... } }, T[1..S] the slot tensors;
--     run(T) checks every slot against the layout it was compiled for (type, sizes, strides,
--     the storage holding the elements) and returns false, touching nothing, on any
--     difference; else runs the ops in order and returns true.
--
-- Ops (out, a, b slots; c a number):
--   copy(out, a)  add(out, a, b)  sub(out, a, b)  mul(out, a, b)  addc(out, a, c)  mulc(out, a, c)
--   sigmoid(out, a): 1 / (1 + exp(-a)) as the Tensor method's numpy loops    tanh(out, a)
--   sigmoid_bwd(out, g, y): g * (1 - y) * y    tanh_bwd(out, g, y): g * (1 - y * y)
--   zero(out)
-- Every operand of an op has the op's element count; a slot is contiguous or rows of
-- contiguous elements at a row stride (a narrowed or selected gate); an op whose strided
-- operands disagree on the row length is not compiled. An op's output may be one of its
-- inputs only where noted by the planner (a sum into its first operand).
local ffi = require 'ffi'
local backend = require 'torch.backend'
local object = require 'torch.core.object'
local dtype = require 'torch.core.dtype'
local ufunc = require 'torch.backend.cpu.ufunc'

local fields = object.fields
local Float = dtype.Float

-- numpy's float32 loops the ops use (false where numpy lends none: then nothing compiles)
local loopNames = { add = 2, subtract = 2, multiply = 2, negative = 1, exp = 1, reciprocal = 1, tanh = 1 }
local loops
local function floatLoops()
  if loops ~= nil then return loops end
  loops = {}
  for name, nin in pairs(loopNames) do
    local l = ufunc.loop(name, ('f'):rep(nin) .. '->f')
    if not l then loops = false; return false end
    loops[name] = l
  end
  return loops
end

-- The layout of a tensor's elements in row-major order: rows of cols contiguous elements,
-- rowStride apart (rows == 1 when contiguous), or nil when they are not so laid out.
local function layout(f)
  local sz, str = f._sz, f._str
  local nd = #sz
  local n = 1
  for d = 1, nd do n = n * sz[d] end
  if n == 0 then return nil end
  -- trailing dims that run contiguously make the row
  local cols, expect, d = 1, 1, nd
  while d >= 1 and (sz[d] == 1 or str[d] == expect) do
    expect = expect * sz[d]
    cols = cols * sz[d]
    d = d - 1
  end
  if d < 1 then return { n = n, rows = 1, cols = n, rowStride = n, extent = n } end
  -- the leading dims must make one uniform stride
  local rows, rowStride, inner = 1, nil, nil
  for k = d, 1, -1 do
    if sz[k] ~= 1 then
      if not rowStride then
        rowStride, inner = str[k], str[k] * sz[k]
      elseif str[k] ~= inner then
        return nil
      else
        inner = str[k] * sz[k]
      end
      rows = rows * sz[k]
    end
  end
  if not rowStride or rowStride < cols then return nil end
  return { n = n, rows = rows, cols = cols, rowStride = rowStride, extent = (rows - 1) * rowStride + cols }
end

local function snapshotLayout(t)
  local f = fields[t]
  if not f or f._dt ~= Float or not f._st or not f._st._ptr then return nil end
  local l = layout(f)
  if not l then return nil end
  l.sz, l.str = {}, {}
  for d = 1, #f._sz do l.sz[d], l.str[d] = f._sz[d], f._str[d] end
  return l
end

local binaryOf = { add = 'add', sub = 'subtract', mul = 'multiply', sigmoid_bwd = true, tanh_bwd = true }

-- the row length of the walk over an op's operands, or nil when they disagree
local function walkCols(ls, n)
  local cols
  for _, l in ipairs(ls) do
    if l.n ~= n then return nil end
    if l.rows > 1 then
      if cols and cols ~= l.cols then return nil end
      cols = l.cols
    end
  end
  return cols or n
end

local function compile(prog, T)
  local L = floatLoops()
  if not L then return nil end
  local S = prog.nslots
  local lays = {}
  for s = 1, S do
    lays[s] = snapshotLayout(T[s])
    if not lays[s] then return nil end
  end
  local consts = {}
  local src = { 'local fields, F, L, C, charp, U, B = ...', 'return function(T)' }
  local function emit(s, ...) src[#src + 1] = select('#', ...) > 0 and s:format(...) or s end
  -- the slot checks and pointers
  for s = 1, S do
    local l = lays[s]
    emit('local f%d = fields[T[%d]]; if not f%d or f%d._dt ~= F then return false end', s, s, s, s)
    emit('local st%d, z%d, r%d = f%d._st, f%d._sz, f%d._str', s, s, s, s, s, s)
    local conds = { ('not st%d'):format(s), ('#z%d ~= %d'):format(s, #l.sz) }
    for d = 1, #l.sz do
      conds[#conds + 1] = ('z%d[%d] ~= %d or r%d[%d] ~= %d'):format(s, d, l.sz[d], s, d, l.str[d])
    end
    emit('if %s then return false end', table.concat(conds, ' or '))
    emit('local o%d = f%d._off; if o%d < 0 or st%d._n < o%d + %d then return false end', s, s, s, s, s, l.extent)
    emit('local p%d = charp(st%d._ptr + o%d)', s, s, s)
  end
  local function const(v)
    consts[#consts + 1] = v
    return ('C + %d'):format(4 * (#consts - 1))
  end
  -- one loop call over the operands (slots or constant pointers with step 0)
  local function call(loopName, operands, n)
    local ls = {}
    for _, o in ipairs(operands) do if type(o) == 'number' then ls[#ls + 1] = lays[o] end end
    local cols = walkCols(ls, n)
    if not cols then return false end
    local rows = n / cols
    local function ptr(o, r)
      if type(o) ~= 'number' then return o end
      local l = lays[o]
      if rows == 1 then return 'p' .. o end
      local rs = l.rows == 1 and cols or l.rowStride
      return ('p%d + %s * %d'):format(o, r, 4 * rs)
    end
    local function step(o) return type(o) == 'number' and 4 or 0 end
    local fn = #operands == 2 and 'U' or 'B'
    local r = rows == 1 and '0' or 'i'
    local argsList = {}
    for _, o in ipairs(operands) do
      argsList[#argsList + 1] = ptr(o, r)
      argsList[#argsList + 1] = step(o)
    end
    local line = ('%s(L.%s, %d, %s)'):format(fn, loopName, cols, table.concat(argsList, ', '))
    if rows == 1 then emit(line) else emit('for i = 0, %d do %s end', rows - 1, line) end
    return true
  end
  for _, op in ipairs(prog.ops) do
    local name, out, a, b = op[1], op[2], op[3], op[4]
    local n = lays[out].n
    local ok = true
    if name == 'copy' then
      ok = call('add', { a, const(0), out }, n)   -- a + 0: a copy on any layout (-0 stays -0)
    elseif name == 'zero' then
      local l = lays[out]
      if l.rows == 1 then emit('ffi.fill(p%d, %d, 0)', out, 4 * n)
      else emit('for i = 0, %d do ffi.fill(p%d + i * %d, %d, 0) end', l.rows - 1, out, 4 * l.rowStride, 4 * l.cols) end
    elseif binaryOf[name] == true then   -- sigmoid_bwd / tanh_bwd: out = g * f(y)
      local g, y = a, b
      if out == g or out == y then return nil end
      if name == 'sigmoid_bwd' then
        ok = call('subtract', { const(1), y, out }, n) and call('multiply', { g, out, out }, n)
             and call('multiply', { out, y, out }, n)
      else
        ok = call('multiply', { y, y, out }, n) and call('subtract', { const(1), out, out }, n)
             and call('multiply', { g, out, out }, n)
      end
    elseif binaryOf[name] then
      ok = call(binaryOf[name], { a, b, out }, n)
    elseif name == 'addc' then
      ok = call('add', { a, const(op[4]), out }, n)
    elseif name == 'mulc' then
      ok = call('multiply', { a, const(op[4]), out }, n)
    elseif name == 'sigmoid' then
      ok = call('negative', { a, out }, n) and call('exp', { out, out }, n)
           and call('add', { out, const(1), out }, n) and call('reciprocal', { out, out }, n)
    elseif name == 'tanh' then
      ok = call('tanh', { a, out }, n)
    else
      return nil
    end
    if not ok then return nil end
  end
  emit('return true')
  emit('end')
  local cbuf = ffi.new('float[?]', math.max(#consts, 1), consts)
  local charp = ffi.typeof('char *')
  local build = assert(load(table.concat(src, '\n'), '=nn_chain', 't', { ffi = ffi }))
  local run = build(fields, Float, L, ffi.cast(charp, cbuf), function(p) return ffi.cast(charp, p) end,
    ufunc.unary, ufunc.binary)
  return run, cbuf
end

local function chainCompile(prog, T)
  local run, cbuf = compile(prog, T)
  if not run then return nil end
  return function(t)
    local _ = cbuf   -- the constants stay alive with the runner
    return run(t)
  end
end

backend.register('cpu', { chain_compile = chainCompile })
