-- Fused elementwise chains (issue 25's whole-model plans): a chain of elementwise modules
-- (an LSTM's gates: Sigmoid, Tanh, CMulTable, CAddTable, ...) compiled once into a table of
-- numpy's SIMD loop calls (and memcpy) on the tensors' memory, run by one small loop with no
-- module call, check or allocation on the way. lua/nngraph/plan.lua describes a chain as a
-- program over slots (tensors); this file compiles it for the layouts the slots have now:
--
--   chain_compile(prog, T) -> run(T) or nil (nil: a slot or op this compiler does not take)
--     prog = { nslots = S, ops = { {name, out, a, b}, ... } }, T[1..S] the slot tensors;
--     run(T) checks every slot against the layout it was compiled for (element type, sizes,
--     strides, the storage holding the elements) and returns false, touching nothing, on any
--     difference; else runs the ops in order and returns true. A chain is Float or Double (its
--     first op's output decides; every other operand but onehot's indices must match, else
--     nothing compiles): numpy's float32 or float64 loops.
--
-- Ops (out, a, b slots; c a number):
--   copy(out, a)  add(out, a, b)  sub(out, a, b)  mul(out, a, b)  addc(out, a, c)  mulc(out, a, c)
--   sigmoid(out, a): 1 / (1 + exp(-a)) in the Tensor method's four numpy loops    tanh(out, a)
--     (Double: the op table's unary pass itself, the Tensor method's and so the module's, which
--     runs a LuaJIT loop below numpy's threshold: the values are the module's to the bit)
--   sigmoid_bwd(out, g, y): g * (1 - y) * y    tanh_bwd(out, g, y): g * (1 - y * y)
--   zero(out)
--   onehot(out, idx): out (count x classes, contiguous) zero but 1 at column idx[i] of row i
--     (idx Long, 1-D); indices outside [1, classes] make run(T) decline before anything runs
-- (the backward forms round after each step, where the modules' LuaJIT loops compute in double
-- and round once: in Float they agree to float32 rounding; in Double each step is the loop's
-- own, g * (1 - y) * y in its order, and they agree to the bit). Every operand of an op has the
-- op's element count; a slot is contiguous or rows of contiguous elements at a row stride (a
-- narrowed or selected gate), walked row by row; an op whose strided operands disagree on the
-- row length is not compiled. Ops run in the given order, each reading its operands as it
-- runs, as the modules would (an output may be a later op's input).
local ffi = require 'ffi'
local backend = require 'torch.backend'
local object = require 'torch.core.object'
local dtype = require 'torch.core.dtype'
local ufunc = require 'torch.backend.cpu.ufunc'

local fields = object.fields
local M = {}
-- Whether compiled chains keep what their slot checks found (see compile's runner); tests
-- compare both.
M.cachedChecks = true
local Float, Double, Long = dtype.Float, dtype.Double, dtype.Long

-- numpy's loops the ops use, by element type: Float's float32 loops, Double's float64 ones
-- (false where numpy lends none: then nothing compiles)
local loopNames = { add = 2, subtract = 2, multiply = 2, negative = 1, exp = 1, reciprocal = 1, tanh = 1 }
local typeChar = { [Float] = 'f', [Double] = 'd' }
local loopsOf = {}
local function realLoops(dt)
  local loops = loopsOf[dt]
  if loops ~= nil then return loops end
  loops = {}
  for name, nin in pairs(loopNames) do
    local l = ufunc.loop(name, typeChar[dt]:rep(nin) .. '->' .. typeChar[dt])
    if not l then loops = false; break end
    loops[name] = l
  end
  loopsOf[dt] = loops
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
  if not f or (not typeChar[f._dt] and f._dt ~= Long) or not f._st or not f._st._ptr then return nil end
  local l = layout(f)
  if not l then return nil end
  l.dt = f._dt
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

-- A compiled chain is a table of loop calls (cdata, so that the runner's loop over it compiles
-- to machine code with no allocation): each names its operands by slot (0: the constants) and
-- byte offset from the slot's first element.
ffi.cdef [[
typedef struct {
  int32_t kind;                 /* 1: unary loop, 2: binary loop, 3: memcpy, 4: zero fill, 5: one-hot,
                                   6: the op table's unary (n: its entry in tensorOps) */
  int32_t a, b, c;              /* slots of the operands (c the output) */
  intptr_t ao, bo, co;          /* byte offsets from each slot's first element */
  intptr_t sa, sb, sc;          /* byte steps (0: a constant) */
  intptr_t n;                   /* elements (bytes for 3 and 4) */
  luabridge_ufunc_loop fn;
  void *data;
} luabridge_chain_call;
]]
local charp = ffi.typeof('char *')
local longp = ffi.typeof('int64_t *')
local realp = { [Float] = ffi.typeof('float *'), [Double] = ffi.typeof('double *') }
local constsType = { [Float] = ffi.typeof('float[?]'), [Double] = ffi.typeof('double[?]') }
local callsType = ffi.typeof('luabridge_chain_call[?]')
local basesType = ffi.typeof('char *[?]')
local args = ffi.new('char *[3]')
local dims = ffi.new('intptr_t[1]')
local steps = ffi.new('intptr_t[3]')

local function compile(prog, T)
  local S = prog.nslots
  local lays = {}
  for s = 1, S do
    lays[s] = snapshotLayout(T[s])
    if not lays[s] then return nil end
  end
  -- one element type for the whole chain, its first output's (Float or Double): an operand of
  -- another type (mixed Float and Double) makes the chain decline
  local first = prog.ops[1]
  local rdt = first and lays[first[2]].dt
  if not typeChar[rdt] then return nil end
  local L = realLoops(rdt)
  if not L then return nil end
  local esz, rp = rdt.size, realp[rdt]
  local consts, calls = {}, {}
  local function const(v)
    consts[#consts + 1] = v
    return { const = esz * (#consts - 1) }
  end
  local function add(c) calls[#calls + 1] = c end
  -- one loop over the operands (slots, or constants at step 0), by rows where one is strided
  local function call(loopName, operands, n)
    local ls = {}
    for _, o in ipairs(operands) do if type(o) == 'number' then ls[#ls + 1] = lays[o] end end
    local cols = walkCols(ls, n)
    if not cols then return false end
    local l = L[loopName]
    for r = 0, n / cols - 1 do
      local c = { kind = #operands - 1, n = cols, fn = l.fn, data = l.data }
      for j, o in ipairs(operands) do
        local slotKey, offKey, stepKey = ({ 'a', 'b', 'c' })[j], ({ 'ao', 'bo', 'co' })[j], ({ 'sa', 'sb', 'sc' })[j]
        if #operands == 2 and j == 2 then slotKey, offKey, stepKey = 'c', 'co', 'sc' end
        if type(o) == 'number' then
          local lo = lays[o]
          c[slotKey], c[offKey], c[stepKey] = o, esz * r * (lo.rows == 1 and cols or lo.rowStride), esz
        else
          c[slotKey], c[offKey], c[stepKey] = 0, o.const, 0
        end
      end
      add(c)
    end
    return true
  end
  local function rowsOf(la, lo, n)
    local cols = walkCols(la and { la, lo } or { lo }, n)
    return cols
  end
  local checks = {}   -- onehot's index checks, run before any op writes
  local tensorOps = {}  -- {name, out, a}: the op table's unary(name, T[out], T[a])
  local unaryOp = backend.of(T[1]).unary
  for _, op in ipairs(prog.ops) do
    local name, out, a, b = op[1], op[2], op[3], op[4]
    local n = lays[out].n
    local ok = true
    for j = 2, #op do
      local o = op[j]
      if type(o) == 'number' and lays[o] and (j ~= 3 or name ~= 'onehot') and (name ~= 'mulc' and name ~= 'addc' or j < 4)
          and lays[o].dt ~= rdt then
        return nil
      end
    end
    if name == 'onehot' then   -- out (count x classes, contiguous) = rows of zeros, 1 at index a[i]
      local li, lo = lays[a], lays[out]
      if li.dt ~= Long or #li.sz ~= 1 or lo.rows ~= 1 or #lo.sz ~= 2 or lo.sz[1] ~= li.n then return nil end
      local c = { kind = 5, a = a, sa = li.str[1], c = out, n = li.n, bo = lo.sz[2] }
      checks[#checks + 1] = c
      add(c)
    elseif name == 'copy' or name == 'zero' then   -- memcpy / memset, by rows where strided
      local la, lo = name == 'copy' and lays[a] or nil, lays[out]
      if la and la.n ~= n then return nil end
      local cols = rowsOf(la, lo, n)
      if not cols then return nil end
      for r = 0, n / cols - 1 do
        add({ kind = name == 'copy' and 3 or 4, n = esz * cols,
              a = la and a or 0, ao = la and esz * r * (la.rows == 1 and cols or la.rowStride) or 0,
              c = out, co = esz * r * (lo.rows == 1 and cols or lo.rowStride) })
      end
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
    elseif (name == 'sigmoid' or name == 'tanh') and rdt == Double then
      -- the Tensor method's own pass (the module's: a LuaJIT loop below its numpy threshold,
      -- numpy's loops above), so the values are the module's to the bit
      if lays[a].n ~= n then return nil end
      tensorOps[#tensorOps + 1] = { name, out, a }
      add({ kind = 6, n = #tensorOps })
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
  local N = #calls
  local E = callsType(math.max(N, 1))
  for i, c in ipairs(calls) do
    local e = E[i - 1]
    e.kind, e.a, e.b, e.c = c.kind, c.a or 0, c.b or 0, c.c or 0
    e.ao, e.bo, e.co = c.ao or 0, c.bo or 0, c.co or 0
    e.sa, e.sb, e.sc, e.n = c.sa or 0, c.sb or 0, c.sc or 0, c.n
    if c.fn then e.fn, e.data = c.fn, c.data end
  end
  local cbuf = constsType[rdt](math.max(#consts, 1), consts)
  local B = basesType(S + 1)
  B[0] = ffi.cast(charp, cbuf)
  local ez, er, ext = {}, {}, {}
  local dts = {}
  for s = 1, S do ez[s], er[s], ext[s], dts[s] = lays[s].sz, lays[s].str, lays[s].extent, lays[s].dt end
  local copy, fill = ffi.copy, ffi.fill
  local nChecks = #checks
  local checkSlot, checkStep, checkN, checkC = {}, {}, {}, {}
  for i, c in ipairs(checks) do checkSlot[i], checkStep[i], checkN[i], checkC[i] = c.a, c.sa, c.n, c.bo end
  -- Each slot is checked on every call against the layout compiled for. cachedChecks (the
  -- default): per slot, what the last call found is kept: the tensor and its fields table (a
  -- tensor's fields table is its own for life: torch.core.object), the size and stride arrays
  -- it checked (resize, set and views install new arrays, so the same arrays hold the same
  -- sizes: their entries are read again only when the arrays differ), and the storage and its
  -- fields. In a long unrolled sequence (char-rnn's 50 clones) each slot's tables are cold, so
  -- the fewer read per call, the fewer cache misses. The storage's element count and address
  -- are read on every call. Without cachedChecks every entry is read on every call.
  local lastT, lastF, lastSz, lastStr, lastSt, lastSf = {}, {}, {}, {}, {}, {}
  -- whether size and stride arrays z, r hold slot s's compiled layout
  local function laidOut(s, z, r)
    local wz, wr = ez[s], er[s]
    local nd = #wz
    if #z ~= nd or #r ~= nd then return false end
    for d = 1, nd do
      if z[d] ~= wz[d] or r[d] ~= wr[d] then return false end
    end
    return true
  end
  local function cachedSlots(t)
    for s = 1, S do
      local u = t[s]
      local f = lastF[s]
      if u ~= lastT[s] or not f then
        f = fields[u]
        if not f then return false end
        lastT[s], lastF[s], lastSz[s], lastStr[s] = u, f, nil, nil
      end
      if f._dt ~= dts[s] then return false end
      local st, z, r = f._st, f._sz, f._str
      if not st then return false end
      if z ~= lastSz[s] or r ~= lastStr[s] then
        if not laidOut(s, z, r) then return false end
        lastSz[s], lastStr[s] = z, r
      end
      local sf = lastSf[s]
      if st ~= lastSt[s] or not sf then
        sf = fields[st]
        if not sf or not sf._ptr then return false end
        lastSt[s], lastSf[s] = st, sf
      end
      local o = f._off
      if o < 0 or sf._n < o + ext[s] then return false end
      B[s] = ffi.cast(charp, sf._ptr + o)
    end
    return true
  end
  local function fullSlots(t)
    for s = 1, S do
      local f = fields[t[s]]
      if not f or f._dt ~= dts[s] then return false end
      local st = f._st
      if not st or not laidOut(s, f._sz, f._str) then return false end
      local o = f._off
      if o < 0 or st._n < o + ext[s] then return false end
      B[s] = ffi.cast(charp, st._ptr + o)
    end
    return true
  end
  local slots = M.cachedChecks and cachedSlots or fullSlots
  return function(t)
    local _ = cbuf   -- the constants live as long as the runner
    if not slots(t) then return false end
    for k = 1, nChecks do   -- indices out of range: declined before anything is written
      local ip, step, C = ffi.cast(longp, B[checkSlot[k]]), checkStep[k], checkC[k]
      for i = 0, checkN[k] - 1 do
        local v = ip[i * step]
        if v < 1 or v > C then return false end
      end
    end
    for i = 0, N - 1 do
      local e = E[i]
      local kind = e.kind
      if kind == 2 then
        args[0], args[1], args[2] = B[e.a] + e.ao, B[e.b] + e.bo, B[e.c] + e.co
        dims[0], steps[0], steps[1], steps[2] = e.n, e.sa, e.sb, e.sc
        e.fn(args, dims, steps, e.data)
      elseif kind == 1 then
        args[0], args[1] = B[e.a] + e.ao, B[e.c] + e.co
        dims[0], steps[0], steps[1] = e.n, e.sa, e.sc
        e.fn(args, dims, steps, e.data)
      elseif kind == 3 then
        copy(B[e.c] + e.co, B[e.a] + e.ao, e.n)
      elseif kind == 6 then
        local o = tensorOps[tonumber(e.n)]
        unaryOp(o[1], t[o[2]], t[o[3]])
      elseif kind == 5 then
        local n, C, step = tonumber(e.n), tonumber(e.bo), tonumber(e.sa)
        local ip, op = ffi.cast(longp, B[e.a]), ffi.cast(rp, B[e.c])
        fill(op, esz * n * C, 0)
        for i = 0, n - 1 do op[i * C + tonumber(ip[i * step]) - 1] = 1 end
      else
        fill(B[e.c] + e.co, e.n, 0)
      end
    end
    return true
  end
end

local function chainCompile(prog, T) return compile(prog, T) end

------------------------------------------------------------------------------------------------
-- Linear nodes' weight gradients on a second thread (a plan's accGradParameters pass, issue 25):
-- gradWeight += scale * gradOutput^T . input runs on gemm_async's worker while this thread goes
-- on with the next nodes (their products, the bias gradients). Float only (the worker runs
-- oneDNN's dnnl_sgemm); only while a second CPU is free for it (blas.threadsFor's rule, counting
-- OpenBLAS's spinning workers as busy). The caller (lua/nngraph/plan.lua) picks which products
-- go: the two threads share a pass's products.
local blas = require 'torch.backend.cpu.blas'
local async = require 'torch.backend.cpu.gemm_async'
local apply = require 'torch.backend.cpu.apply'
local ptr, isContiguous = apply.ptr, apply.isContiguous

-- Whether a pass may post products now (`acc_async_ready`; false: run them all here).
local function accAsyncReady(like)
  return async.enabled and like._dt == Float and blas.threads > 1 and blas.threadsFor(2e6, 1e6, true, true) > 1
end

local function matrix(t, rows, cols)
  local sz = t._sz
  return t._dt == Float and #sz == 2 and sz[1] == rows and sz[2] == cols and isContiguous(t)
end

-- The first and one-past-last byte of t's elements (t contiguous).
local function span(t)
  local p = ffi.cast('uintptr_t', ptr(t))
  return p, p + 4 * t._sz[1] * t._sz[2]
end
local function apart(a, b)
  local a0, a1 = span(a)
  local b0, b1 = span(b)
  return a1 <= b0 or b1 <= a0
end

-- gradWeight (O x I) += scale * gradOutput (n x O)^T . input (n x I) posted to the worker, and
-- gradBias (O, or nil) += scale * gradOutput^T . ones (n) here; true when done so, false (nothing
-- touched) when an operand is not a contiguous Float matrix of those sizes, gradWeight overlaps
-- an operand, or the worker is unavailable: the caller runs the module's own pass.
local function linearAccAsync(gw, gb, input, gradOutput, ones, scale)
  local O, I = gw._sz[1], gw._sz[2]
  if #gw._sz ~= 2 or #input._sz ~= 2 then return false end
  local n = input._sz[1]
  if n < 1 or not matrix(gw, O, I) or not matrix(input, n, I) or not matrix(gradOutput, n, O)
      or not apart(gw, input) or not apart(gw, gradOutput) then
    return false
  end
  if gb and not (gb._dt == Float and #gb._sz == 1 and gb._sz[1] == O and isContiguous(gb)
      and ones and ones._dt == Float and #ones._sz == 1 and ones._sz[1] == n and isContiguous(ones)) then
    return false
  end
  if async.pending(ptr(gw)) then async.wait() end
  if not async.post(true, false, O, I, n, scale, ptr(gradOutput), O, ptr(input), I, 1, ptr(gw), I) then
    return false
  end
  if gb then blas.gemv(Float, false, O, n, scale, ptr(gradOutput), O, ptr(ones), 1, 1, ptr(gb), 1) end
  return true
end

-- A Linear's forward, out (n x O) = input (n x I) . weight (O x I)^T + bias (O, or nil),
-- posted to the worker (out first filled with the bias rows: the product adds to them); true
-- when posted, false (nothing touched) when an operand is not a contiguous Float matrix of
-- those sizes, out overlaps an operand, or the worker is unavailable.
local function linearForwardAsync(out, input, weight, bias)
  if #input._sz ~= 2 or #weight._sz ~= 2 then return false end
  local n, I, O = input._sz[1], input._sz[2], weight._sz[1]
  if n < 1 or not matrix(out, n, O) or not matrix(input, n, I) or not matrix(weight, O, I)
      or not apart(out, input) or not apart(out, weight) then
    return false
  end
  if bias then
    if not (bias._dt == Float and #bias._sz == 1 and bias._sz[1] == O and isContiguous(bias)) then return false end
    local b0, b1 = ffi.cast('uintptr_t', ptr(bias)), ffi.cast('uintptr_t', ptr(bias)) + 4 * O
    local o0, o1 = span(out)
    if not (b1 <= o0 or o1 <= b0) then return false end
  end
  if async.pending(ptr(out)) then async.wait() end
  if bias then
    local o, b, row = ptr(out), ptr(bias), 4 * O
    for i = 0, n - 1 do ffi.copy(o + i * O, b, row) end
  end
  return async.post(false, true, n, O, I, 1, ptr(input), I, ptr(weight), I, bias and 1 or 0, ptr(out), O)
end

-- Whether a product posted and not yet waited for writes t's elements.
local function accPending(t) return async.pending(ptr(t)) end

backend.register('cpu', { chain_compile = chainCompile, acc_async_ready = accAsyncReady,
  linear_acc_async = linearAccAsync, linear_forward_async = linearForwardAsync, acc_pending = accPending,
  acc_wait = async.wait })

return M
