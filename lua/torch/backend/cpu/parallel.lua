-- A parallel for over generated LuaJIT loops, for the CPU passes that have no library kernel
-- (max pooling's forward loops, its indices pass and its backward scatter): a loop over [0, n)
-- runs in chunks on the threads blas.threadsFor gives (torch.setnumthreads, never more than the
-- CPUs free): this thread and the workers of luabridge/graph/fusion_threads.lua's team, which
-- wait on a pthread condition in Lua runtimes of their own and compile the loop from its text.
--
-- A loop is the text of a chunk returning function(lo, hi, a1, ..., ak) that does items
-- [lo, hi) (e.g. planes), and its signature: for each argument a pointer's ctype ('T *' for the
-- element type's) or 'number'. Items must be independent (each written by one item only), so
-- that a chunk computes what the whole loop would on one thread: the results are the same bit
-- for bit at every thread count. A worker receives the pointers and numbers, nothing else: the
-- text can use only the standard library and ffi.
local ffi = require 'ffi'
local blas = require 'torch.backend.cpu.blas'

local parallel = {}

-- Whether loops run on several threads (false, or LUABRIDGE_PARALLEL_LOOPS=0: every loop on
-- this one; read at every call: tests compare both).
parallel.enabled = os.getenv('LUABRIDGE_PARALLEL_LOOPS') ~= '0'
-- The calls split over threads (tests check that the threaded path ran).
parallel.runs = 0

local team   -- luabridge.graph.fusion_threads, loaded on the first threaded call
local unpack = unpack or table.unpack

-- The thread count for a loop of `work` units (e.g. elements touched), at least `least` a
-- thread; 1 when parallel.enabled is false.
function parallel.threads(work, least)
  if not parallel.enabled then return 1 end
  return blas.threadsFor(work, least, true)
end

-- The text the workers compile: function(P, N) giving kernel(lo, hi) over the pointers P (cast
-- to the signature's ctypes) and numbers N.
-- (the pointer types are made once per text: not by a cast from a type string at every job)
local function workerText(name, src, ctypes)
  local args, decl, types, np, nn = {}, {}, {}, 0, 0
  for k, ct in ipairs(ctypes) do
    args[k] = 'a' .. k
    if ct == 'number' then
      nn = nn + 1
      decl[k] = ('local a%d = N[%d]'):format(k, nn)
    else
      np = np + 1
      types[#types + 1] = ('local t%d = ffi.typeof(%q)'):format(k, ct)
      decl[k] = ('local a%d = ffi.cast(t%d, P[%d])'):format(k, k, np)
    end
  end
  local list = table.concat(args, ', ')
  return ('-- %s\nlocal ffi = require "ffi"\n%s\nlocal f = (function()\n%s\nend)()\n' ..
    'return function(P, N)\n  %s\n  return function(lo, hi) return f(lo, hi%s) end\nend\n'):format(
    name, table.concat(types, '\n'), src, table.concat(decl, '\n  '), #args > 0 and ', ' .. list or '')
end

-- parallel.loop(name, src, signature)[dt]: the loop for element type dt, callable as
-- run(threads, n, a1, ..., ak) (threads from parallel.threads; 1 runs f(0, n, ...) here).
function parallel.loop(name, src, signature)
  return setmetatable({}, { __index = function(loops, dt)
    local f = assert(loadstring(src, '=' .. name .. ' loop (' .. dt.name .. ')'))()
    local ctypes, kinds = {}, {}
    for k, s in ipairs(signature) do
      ctypes[k] = s == 'number' and s or (s:gsub('^T%f[%W]', dt.ctype))
      kinds[k] = s == 'number' and 'number' or 'cdata'
    end
    local text = workerText(name .. ' (' .. dt.name .. ')', src, ctypes)
    local nargs = #signature
    local function run(threads, n, ...)
      if threads <= 1 or n <= 1 then return f(0, n, ...) end
      local args, P, N = { ... }, {}, {}
      for k = 1, nargs do
        local a = args[k]
        if type(a) ~= kinds[k] then
          error(('%s: argument %d is a %s, not a %s'):format(name, k, type(a), kinds[k]), 2)
        end
        if kinds[k] == 'number' then N[#N + 1] = a else P[#P + 1] = a end
      end
      team = team or require 'luabridge.graph.fusion_threads'
      parallel.runs = parallel.runs + 1
      team.parallel(text, P, N, function(lo, hi) return f(lo, hi, unpack(args, 1, nargs)) end,
        n, math.min(threads, n), 1)
    end
    loops[dt] = run
    return run
  end })
end

-- The text of a chunk adapter for a loop over P planes, function(ip, io, op, oo, xp, xo, P,
-- a1, ..., ak) (pointers and offsets: ip's planes of `plane` elements, op's and xp's of
-- `oplane`): function(lo, hi, ip, io, op, oo, xp, xo, plane, oplane, a1, ..., ak) runs planes
-- [lo, hi) by moving the offsets (the planes are independent; nothing else changes).
function parallel.planes(src, k)
  local extra = {}
  for i = 1, k do extra[i] = ', a' .. i end
  extra = table.concat(extra)
  return ('local f = (function()\n%s\nend)()\nreturn function(lo, hi, ip, io, op, oo, xp, xo, plane, oplane%s)\n' ..
    '  return f(ip, io + lo * plane, op, oo + lo * oplane, xp, xo + lo * oplane, hi - lo%s)\nend'):format(src, extra, extra)
end

-- The signature of parallel.planes' adapter with k numbers after the planes' sizes; `index`
-- the ctype of xp ('int64_t *': torch7's indices).
function parallel.planesSignature(k, index)
  local s = { 'T *', 'number', 'T *', 'number', index or 'int64_t *', 'number', 'number', 'number' }
  for _ = 1, k do s[#s + 1] = 'number' end
  return s
end

return parallel
