-- Fused elementwise groups (luabridge/graph/fusion_ir.py) as generated LuaJIT loops: one pass
-- over memory computes a whole group per element. The IR arrives as nested Lua lists
-- ({'add', {'in', 0}, {'const', 1.5}}); every distinct sub-expression becomes one local of the
-- loop body (computed once however often it is used), in double precision, stored rounded to
-- the output's type. The source depends on the expressions and on which inputs broadcast,
-- never on the sizes, so one compiled prototype serves every group and shape alike. A large
-- blocked group runs its blocks in chunks on several threads (fusion_threads.lua): each chunk
-- runs the same loops, so the values do not depend on the thread count.
require 'torch'
local ffi = require 'ffi'
local backend = require 'torch.backend'
local structure = require 'torch.core.apply'
local host = backend.host   -- numpy's loops over host memory (ufunc_loop)
local team = require 'luabridge.graph.fusion_threads'   -- the worker threads of large groups
local isContiguous, numel = structure.isContiguous, structure.numel

-- The pointer to the first element of an operand in host memory, from its op table.
local function ptr(t) return backend.of(t).ptr(t) end

local M = {}

-- fn -> Lua text over its operands $1 $2 $3 (locals or literals, so repeats cost nothing)
local FN = {
  add = '$1 + $2', sub = '$1 - $2', mul = '$1 * $2', div = '$1 / $2', neg = '-$1',
  abs = 'abs($1)', exp = 'exp($1)', log = 'log($1)', sqrt = 'sqrt($1)', rsqrt = '1 / sqrt($1)',
  tanh = 'tanh($1)', sigmoid = '1 / (1 + exp(-$1))', relu = '$1 < 0 and 0 or $1',
  max = '($1 >= $2 or $1 ~= $1) and $1 or $2', min = '($1 <= $2 or $1 ~= $1) and $1 or $2',
  pow = '$1 ^ $2', square = '$1 * $1',
  lt = '$1 < $2 and 1 or 0', le = '$1 <= $2 and 1 or 0', gt = '$1 > $2 and 1 or 0',
  ge = '$1 >= $2 and 1 or 0', eq = '$1 == $2 and 1 or 0', ne = '$1 ~= $2 and 1 or 0',
  where = '$1 ~= 0 and $2 or $3', clamp = '$1 < $2 and $2 or ($1 > $3 and $3 or $1)',
}

local function literal(x)
  if x ~= x then return '(0 / 0)' end
  if x == math.huge then return 'math.huge' end
  if x == -math.huge then return '(-math.huge)' end
  return ('(%.17g)'):format(x)
end

-- The run function's first lines: the pointers, taken from the list P (inputs, then outputs)
-- into locals (a generated closure may have at most 60 upvalues, a function 200 locals), and
-- each broadcast input's one element; then `head`'s lines.
local function pointers(nin, nout, scalar, head)
  local lines = {}
  for k = 0, nin - 1 do
    lines[#lines + 1] = ('local p%d = P[%d]'):format(k, k + 1)
    if scalar[k + 1] then lines[#lines + 1] = ('local s%d = p%d[0]'):format(k, k) end
  end
  for j = 1, nout do lines[#lines + 1] = ('local py%d = P[%d]'):format(j, nin + j) end
  for _, line in ipairs(head or {}) do lines[#lines + 1] = line end
  return lines
end

-- The loop source of a group: exprs (IR lists), nin inputs, scalar[k + 1] when input k broadcasts.
local function source(exprs, nin, scalar)
  local body, names = {}, {}
  local function emit(e)
    local kind = e[1]
    if kind == 'in' then return scalar[e[2] + 1] and ('s' .. e[2]) or ('p' .. e[2] .. '[i]') end
    if kind == 'const' then return literal(tonumber(e[2])) end
    local args = {}
    for k = 2, #e do args[k - 1] = emit(e[k]) end
    local text = assert(FN[kind], 'fused: unknown fn ' .. tostring(kind))
    text = text:gsub('%$(%d)', function(k) return args[tonumber(k)] end)
    local name = names[text]
    if not name then
      name = 't' .. (#body + 1)
      names[text] = name
      body[#body + 1] = ('local %s = %s'):format(name, text)
    end
    return name
  end
  local outs = {}
  for j = 1, #exprs do outs[j] = ('py%d[i] = %s'):format(j, emit(exprs[j])) end
  return ([[
local abs, exp, log, sqrt, tanh = math.abs, math.exp, math.log, math.sqrt, math.tanh
return function(n, P)
  return function()
    %s
    for i = 0, n - 1 do
      %s
      %s
    end
  end
end]]):format(table.concat(pointers(nin, #exprs, scalar), '\n    '),
              table.concat(body, '\n      '), table.concat(outs, '\n      '))
end

-- fn -> numpy ufunc steps, each { ufunc, operands... }: an operand is the fn's k-th operand
-- (k), the destination ('dst', for steps after the first) or a constant ('zero', 'one'); fns
-- without one (comparisons, where, clamp) or whose loop numpy does not lend run a Lua loop.
local UFUNC = {
  add = { { 'add', 1, 2 } }, sub = { { 'subtract', 1, 2 } }, mul = { { 'multiply', 1, 2 } },
  div = { { 'divide', 1, 2 } }, neg = { { 'negative', 1 } }, abs = { { 'absolute', 1 } },
  exp = { { 'exp', 1 } }, log = { { 'log', 1 } }, sqrt = { { 'sqrt', 1 } }, tanh = { { 'tanh', 1 } },
  square = { { 'square', 1 } }, pow = { { 'power', 1, 2 } }, max = { { 'maximum', 1, 2 } },
  min = { { 'minimum', 1, 2 } }, relu = { { 'maximum', 1, 'zero' } },
  rsqrt = { { 'sqrt', 1 }, { 'reciprocal', 'dst' } },
  sigmoid = { { 'negative', 1 }, { 'exp', 'dst' }, { 'add', 'dst', 'one' }, { 'reciprocal', 'dst' } },
}
local TYPE_CHAR = { float = 'f', double = 'd' }
-- The cost of one pass over a block, per element, in units of a cheap SIMD loop (add, mul, ...):
-- numpy's exp, log, tanh and power cost about 3, a Lua loop about 8 (bench/fusion.py's chains).
local COST = { exp = 3, log = 3, tanh = 3, power = 3, lua = 8 }

-- The blocked source of a group: per block of `block` elements, each distinct sub-expression is
-- one call of numpy's SIMD loop (or a short Lua loop) into a block buffer that stays in cache;
-- the roots write the outputs. One pass over memory, SIMD inside the block. Returns the source
-- (its factory(n, ctype, loops, pointers) gives kernel(lo, hi), which computes elements
-- lo .. hi - 1, lo a multiple of `block`), the loops it takes and its cost per element (COST).
local function blockedSource(exprs, nin, scalar, ctype, block)
  local head, body, loops, consts, memo = {}, {}, {}, {}, {}
  local ntemp, cost = 0, 0
  -- an operand: { pointer, byte step, element i of it in Lua }
  local function const(x)
    local key = literal(x)
    if not consts[key] then
      consts[#consts + 1] = key
      consts[key] = 'c' .. #consts
      head[#head + 1] = ('local %s = C + %d'):format(consts[key], #consts - 1)
    end
    return { consts[key], '0', key }
  end
  local function loopOf(name, nargs)
    local sig = TYPE_CHAR[ctype]:rep(nargs) .. '->' .. TYPE_CHAR[ctype]
    local l = host.ufunc_loop(name, sig)
    if not l then return nil end
    loops[#loops + 1] = l
    return 'L[' .. #loops .. ']'
  end
  local function luaLoop(fn, args, dst)
    local text = FN[fn]:gsub('%$(%d)', function(k) return args[tonumber(k)][3] end)
    body[#body + 1] = ('for i = 0, m - 1 do %s = %s end'):format(dst[3], text)
    cost = cost + COST.lua
  end
  local function ufuncSteps(fn, args, dst)
    local steps, calls = UFUNC[fn], {}
    if not steps then return false end
    for _, st in ipairs(steps) do
      local ops = {}
      for k = 2, #st do
        local a = st[k]
        ops[k - 1] = a == 'dst' and dst or a == 'zero' and const(0) or a == 'one' and const(1) or args[a]
      end
      local l = loopOf(st[1], #ops)
      if not l then return false end
      local parts = { l, 'm' }
      for _, o in ipairs(ops) do parts[#parts + 1] = o[1]; parts[#parts + 1] = o[2] end
      calls[#calls + 1] = ('%s(%s, %s, S)'):format(#ops == 1 and 'unary' or 'binary',
                                                   table.concat(parts, ', '), dst[1])
    end
    for _, c in ipairs(calls) do body[#body + 1] = c end
    for _, st in ipairs(steps) do cost = cost + (COST[st[1]] or 1) end
    return true
  end
  -- structural keys; uses[key]: operand slots reading that sub-expression (its block buffer is
  -- free for reuse after the last one: a chain needs two or three buffers, not one per op)
  local keys, uses, seen, free = {}, {}, {}, {}
  local function key(e)
    if not keys[e] then
      local parts = { e[1] }
      for k = 2, #e do parts[k] = type(e[k]) == 'table' and key(e[k]) or tostring(e[k]) end
      keys[e] = '(' .. table.concat(parts, ' ') .. ')'
    end
    return keys[e]
  end
  local function count(e)
    if seen[key(e)] then return end
    seen[key(e)] = true
    for k = 2, #e do
      local a = e[k]
      if a[1] ~= 'in' and a[1] ~= 'const' then
        uses[key(a)] = (uses[key(a)] or 0) + 1
        count(a)
      end
    end
  end
  for j = 1, #exprs do if exprs[j][1] ~= 'in' and exprs[j][1] ~= 'const' then count(exprs[j]) end end
  local function emit(e, dst)
    local kind = e[1]
    if kind == 'in' then
      local k = e[2]
      if scalar[k + 1] then return { 'p' .. k, '0', 's' .. k } end
      return { ('(p%d + off)'):format(k), 'S', ('p%d[off + i]'):format(k) }
    end
    if kind == 'const' then return const(tonumber(e[2])) end
    local got = memo[key(e)]
    if got and not dst then return got end
    local args = {}
    for k = 2, #e do args[k - 1] = emit(e[k]) end
    for k = 2, #e do
      local a = args[k - 1]
      if a.temp then
        uses[key(e[k])] = uses[key(e[k])] - 1
        if uses[key(e[k])] == 0 then
          memo[key(e[k])] = nil
          free[#free + 1] = a.temp
        end
      end
    end
    if not dst then
      -- an operand's buffer just freed is fine: the loops read element i before writing it
      local t = table.remove(free)
      if not t then
        ntemp = ntemp + 1
        t = ntemp
        -- set in the run function, so that the closure holds buf itself (GC), not pointers into it
        head[#head + 1] = ('local t%d = buf + %d'):format(t, (t - 1) * block)
      end
      dst = { 't' .. t, 'S', ('t%d[i]'):format(t), temp = t }
    end
    if not ufuncSteps(kind, args, dst) then luaLoop(kind, args, dst) end
    memo[key(e)] = dst
    return dst
  end
  for j = 1, #exprs do
    local out = { ('(py%d + off)'):format(j), 'S', ('py%d[off + i]'):format(j) }
    local got = emit(exprs[j], out)
    if got ~= out then
      body[#body + 1] = ('for i = 0, m - 1 do %s = %s end'):format(out[3], got[3])
      cost = cost + 1
    end
  end
  return ([[
local ffi = require 'ffi'
local abs, exp, log, sqrt, tanh = math.abs, math.exp, math.log, math.sqrt, math.tanh
local charp = ffi.typeof('char *')
local A, D, St = ffi.new('char *[3]'), ffi.new('intptr_t[1]'), ffi.new('intptr_t[3]')
local function unary(l, m, pa, sa, py, sy)
  A[0], A[1], D[0], St[0], St[1] = ffi.cast(charp, pa), ffi.cast(charp, py), m, sa, sy
  l.fn(A, D, St, l.data)
end
local function binary(l, m, pa, sa, pb, sb, py, sy)
  A[0], A[1], A[2], D[0] = ffi.cast(charp, pa), ffi.cast(charp, pb), ffi.cast(charp, py), m
  St[0], St[1], St[2] = sa, sb, sy
  l.fn(A, D, St, l.data)
end
return function(n, ct, L, P)
  local S = ffi.sizeof(ct)
  local buf = ffi.new(ct .. '[?]', %d)
  local C = ffi.new(ct .. '[?]', %d, { %s })
  return function(lo, hi)
    %s
    for off = lo, hi - 1, %d do
      local m = hi - off
      if m > %d then m = %d end
      %s
    end
  end
end]]):format(math.max(1, ntemp) * block, math.max(1, #consts), table.concat(consts, ', '),
              table.concat(pointers(nin, #exprs, scalar, head), '\n    '), block, block, block,
              table.concat(body, '\n      ')), loops, cost
end

local factory = team.factory

-- The thread count for `work` units, at least `least` a thread: the BLAS calls' rule
-- (torch.setnumthreads, never more than the free CPUs) where the host lends it, else
-- torch.setnumthreads' count alone.
local threadsFor
local function hostThreadsFor()
  local ok, f = pcall(function() return host.threads_for end)
  if ok and f then return f end
  return function(work, least)
    local n = math.min(host.threads(), host.cpus())
    if n <= 1 or work < 2 * least then return 1 end
    return math.max(1, math.min(n, math.floor(work / least)))
  end
end

-- The step running a blocked kernel(lo, hi) over its n elements: on one thread, or split over
-- the fusion threads (fusion_threads.lua) when its work (elements x cost per element) is worth
-- it and the thread rule gives more than one.
local function threaded(kernel, src, n, ctype, ptrs, loops, block, cost)
  local work = n * cost * (ctype == 'double' and 2 or 1)   -- half as many doubles per SIMD op
  if work < 2 * M.THREAD_LEAST then return function() kernel(0, n) end end
  threadsFor = threadsFor or hostThreadsFor()
  local d, keep = team.describe(src, n, ctype, ptrs, loops)
  return function()
    local t = team.enabled and threadsFor(work, M.THREAD_LEAST) or 1
    if t > 1 then team.run(d, kernel, n, t, block, keep) else kernel(0, n) end
  end
end

-- The closure computing ys[j] = exprs[j](xs) elementwise; inputs of one element broadcast.
-- `blocked`: numpy's loops per cache-sized block, else one Lua loop per element (the pass
-- decides, graph/passes/fuse.py). Operands that are not contiguous (never the executor's
-- planned buffers) run over contiguous copies.
function M.closure(exprs, xs, ys, blocked)
  local n = numel(ys[1])
  local scalar, direct = {}, true
  for k, x in ipairs(xs) do
    local m = numel(x)
    if m ~= n and m ~= 1 then
      error(('fused group: input %d has %d elements, the output %d'):format(k, m, n), 0)
    end
    scalar[k] = m == 1 and n > 1
    direct = direct and isContiguous(x)
  end
  for _, y in ipairs(ys) do direct = direct and isContiguous(y) end
  if n == 0 then return function() end end
  local ins, outs = {}, {}
  for k, x in ipairs(xs) do ins[k] = direct and x or x:clone() end
  for j, y in ipairs(ys) do outs[j] = direct and y or y:clone() end
  local ptrs = {}
  for k = 1, #ins do ptrs[k] = ptr(ins[k]) end
  for j = 1, #outs do ptrs[#ins + j] = ptr(outs[j]) end
  local loop
  local ctype = tostring(ffi.typeof(ptrs[#ptrs])):match('ctype<(%a+) ?%*>')
  if blocked and TYPE_CHAR[ctype] then
    local block = n >= M.LARGE and M.LARGE_BLOCK or M.BLOCK
    local src, loops, cost = blockedSource(exprs, #xs, scalar, ctype, block)
    loop = threaded(factory(src)(n, ctype, loops, ptrs), src, n, ctype, ptrs, loops, block, cost)
  else
    loop = factory(source(exprs, #xs, scalar))(n, ptrs)
  end
  if direct then return loop end
  return function()
    for k, x in ipairs(xs) do ins[k]:copy(x) end
    loop()
    for j, y in ipairs(ys) do y:copy(outs[j]) end
  end
end

-- Elements per block of the blocked form (bench/fusion.py): small blocks keep groups of ~1e4
-- elements as fast as unfused; from M.LARGE elements on, larger blocks halve the calls per op.
M.BLOCK, M.LARGE_BLOCK, M.LARGE = 1024, 4096, 1000000
-- The least work (elements x cost per element) each thread of a blocked group gets, about 40 us
-- (a cheap pass costs ~0.1 ns per float32 element): a group runs on one thread below twice this.
-- Waking a worker and sharing chunks costs a few us when a CPU is free (bench/fusion.py: the
-- 8-op chains gain on 2 threads from ~3e4 elements when the bench runs ahead of other work).
M.THREAD_LEAST = 400000
M.source, M.blockedSource = source, blockedSource
return M
