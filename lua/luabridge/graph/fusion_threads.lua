-- The worker threads of the fused CPU groups (luabridge/graph/fusion_threads.py): a large
-- group's blocked kernel (fusion_ir.lua) runs over chunks of its elements on several threads.
--
-- A team is memory outside every Lua runtime (malloc'd, kept for the process): a pthread mutex,
-- two conditions and the job (the kernel's description, its chunks, the next one to take, how
-- many run). Its workers are threads.Thread runtimes of their own that wait on the condition,
-- take chunks under the mutex and run them; the calling thread takes chunks too and returns
-- once every chunk has run, so a late or busy worker costs speed only (the caller runs what it
-- did not take), never a wait for a thread that has not started. A worker compiles a kernel
-- from its description (source text, sizes, the operands' and numpy loops' addresses) once and
-- keeps it by the kernel's serial number. Blocking holds no lock of Python's (lupa releases the
-- GIL while Lua runs), and these modules load no torch: a worker's runtime needs ffi alone.
-- The same team runs generic loops too (M.parallel: a kernel made from Lua source text, pointers
-- and numbers; torch/backend/cpu/parallel.lua's loops, e.g. max pooling's).
local ffi = require 'ffi'

ffi.cdef [[
typedef void (*luabridge_fusion_loop)(char **args, const intptr_t *dims, const intptr_t *steps, void *data);
typedef struct {
  int64_t serial, n;
  const char *src;
  int64_t srclen;
  int32_t ctype, nptr, nloop, pad;
  void **ptr, **fn, **data;
  double *num;
  int64_t nnum;
} luabridge_fusion_kernel;
typedef struct {
  uint8_t mutex[64], wake[64], done[64];
  int64_t generation, stop, want, next, chunks, chunk, n, busy, failed, runs, helped;
  int64_t owner, ownerStart;
  luabridge_fusion_kernel *kernel;
  char message[240];
} luabridge_fusion_team;
]]
-- the pthread calls and the team's control block (threads/pthread.lua: gemm_async's worker too)
local pthread = require 'threads.pthread'
local lock, unlock, wait, broadcast = pthread.lock, pthread.unlock, pthread.wait, pthread.broadcast
local getpid = pthread.getpid

local M = {}

-- Whether large groups run on several threads (LUABRIDGE_FUSION_THREADS=0: never; tests turn it
-- off to compare both paths).
M.enabled = os.getenv('LUABRIDGE_FUSION_THREADS') ~= '0'
-- M.enabled, set first to `on` unless on is nil (luabridge/graph/fusion_threads.py's threaded).
function M.threaded(on)
  if on ~= nil then M.enabled = on end
  return M.enabled
end
-- Chunks per thread of a job (more: a thread that falls behind holds up less of it).
M.CHUNKS_PER_THREAD = 4
-- Kernels a worker keeps compiled (past this it drops them all and compiles again on demand).
M.KEEP = 64

local CTYPES = { [0] = 'float', [1] = 'double', float = 0, double = 1 }
-- the ctype of a generic kernel's description (M.parallel): no element type, no numpy loops
local GENERIC = 2

local compiled = {}
-- The factory a generated source text returns, compiled once per text in this runtime.
function M.factory(src)
  local f = compiled[src]
  if not f then
    f = assert(loadstring(src, '=fused group'))()
    compiled[src] = f
  end
  return f
end

-- The kernel function(lo, hi) a description stands for, compiled in this runtime.
local function kernelOf(d)
  if d.ctype == GENERIC then
    local P, N = {}, {}
    for k = 1, d.nptr do P[k] = d.ptr[k - 1] end
    for k = 1, tonumber(d.nnum) do N[k] = d.num[k - 1] end
    return M.factory(ffi.string(d.src, d.srclen))(P, N)
  end
  local ct = CTYPES[d.ctype]
  local P, L = {}, {}
  for k = 1, d.nptr do P[k] = ffi.cast(ct .. ' *', d.ptr[k - 1]) end
  for k = 1, d.nloop do L[k] = { fn = ffi.cast('luabridge_fusion_loop', d.fn[k - 1]), data = d.data[k - 1] } end
  return M.factory(ffi.string(d.src, d.srclen))(tonumber(d.n), ct, L, P)
end

-- Takes chunks of the team's job and runs them (the mutex held on entry and on return).
-- A worker's failure is kept as the job's message (and counted in M.runs' chunks when it ran);
-- the calling thread's first error is returned as it was raised (an interrupt stays one).
local function runChunks(team, kernel, worker)
  local own
  while team.next < team.chunks do
    local c = team.next
    team.next = c + 1
    team.busy = team.busy + 1
    unlock(team.mutex)
    local lo = c * team.chunk
    local hi = lo + team.chunk
    if hi > team.n then hi = team.n end
    local ok, err = pcall(kernel, tonumber(lo), tonumber(hi))
    lock(team.mutex)
    if worker then
      team.helped = team.helped + 1
      if not ok and team.failed == 0 then
        team.failed = 1
        ffi.copy(team.message, tostring(err):sub(1, 239))
      end
    elseif not ok and own == nil then
      own = err
    end
    team.busy = team.busy - 1
  end
  if team.busy == 0 then broadcast(team.done) end
  return own
end

-- A worker's life (its own thread and runtime): jobs until the team stops, or until the thread
-- that owns the team has ended (its runtime can run no job: the workers of a thread that ended
-- no longer wait for Python to collect its runtime; a pool's terminate(), a thread's end).
function M.work(address, index)
  local team = ffi.cast('luabridge_fusion_team *', address)
  local kernels, kept, seen = {}, 0, 0
  lock(team.mutex)
  while team.stop == 0 do
    if team.generation == seen then
      pthread.idle(team, 'generation', seen)   -- ends the team once its thread has ended
    else
      seen = team.generation
      if index < team.want and team.next < team.chunks then
        local d = team.kernel
        local serial = tonumber(d.serial)
        local kernel = kernels[serial]
        if d.ctype == GENERIC then
          -- a generic job's pointers are its own (its factory text is compiled once, M.factory)
          local ok, got = pcall(kernelOf, d)
          kernel = ok and got or function() error(got, 0) end
        elseif not kernel then
          -- d lives while the job runs, and the job cannot end while this worker holds the
          -- mutex and has not looked: compile under it (once per kernel)
          if kept >= M.KEEP then kernels, kept = {}, 0 end
          local ok, got = pcall(kernelOf, d)
          kernel = ok and got or function() error(got, 0) end
          kernels[serial], kept = kernel, kept + 1
        end
        runChunks(team, kernel, true)
      end
    end
  end
  unlock(team.mutex)
end

local team, workers, pid, serials, guard = nil, {}, nil, 0, nil

-- A team's guard (pthread.guard) stops its workers without waiting for them when the runtime
-- that made it closes (or collects the guard): they would otherwise wait for jobs for the rest
-- of the process, each thread holding a runtime of its own (one per closed runtime: a program
-- starting threads that each run a large group piled them up).

-- This runtime's team with at least n workers (started here; a new team after a fork, whose
-- child has none of the parent's threads). Where no thread can be started (a runtime without
-- Python's threads.Thread), the team has fewer and the caller runs the chunks nobody takes.
local function teamOf(n)
  local now = getpid()
  if team and pid == now and team.stop ~= 0 then
    -- its workers ended (they found this team's thread gone: a function of this runtime called
    -- from another thread since): a new team
    if guard then ffi.gc(guard, nil); guard = nil end
    pid = nil
  end
  if pid ~= now then
    team, workers, pid, M.startError = pthread.block('luabridge_fusion_team', 'fused group threads'), {}, now, nil
    guard = pthread.guard(team, now)
    pthread.team(M.stop)
  end
  if #workers < n and not M.startError then
    local address = tonumber(ffi.cast('uintptr_t', team))
    for i = #workers + 1, n do
      local ok, w = pcall(function()
        return require('threads.Thread')(("require('luabridge.graph.fusion_threads').work(%.0f, %d)"):format(address, i))
      end)
      if not ok then
        M.startError = tostring(w)
        break
      end
      workers[i] = w
    end
  end
  return team
end

-- A description of kernel(lo, hi) for the workers, from what the caller compiled it from:
-- src (the factory's text), n, ctype ('float' or 'double'), P (the operands' pointers) and L
-- (numpy's loops, { fn, data }). `keep` holds the memory it points into; keep it with it.
function M.describe(src, n, ctype, P, L)
  serials = serials + 1
  local d = ffi.new('luabridge_fusion_kernel')
  local ptr, fn, data = ffi.new('void *[?]', #P + 1), ffi.new('void *[?]', #L + 1), ffi.new('void *[?]', #L + 1)
  for k, p in ipairs(P) do ptr[k - 1] = p end
  for k, l in ipairs(L) do fn[k - 1], data[k - 1] = ffi.cast('void *', l.fn), l.data end
  d.serial, d.n, d.src, d.srclen = serials, n, src, #src
  d.ctype, d.nptr, d.nloop, d.ptr, d.fn, d.data = CTYPES[ctype], #P, #L, ptr, fn, data
  return d, { src, ptr, fn, data }
end

-- A parallel for over a generated kernel, for any serial LuaJIT pass: runs kernel(lo, hi) (made
-- in this runtime by the caller) over [0, n) in chunks (multiples of `align`) on `threads`
-- threads, where the workers make their kernel(lo, hi) as factory(src)(P, N): src is the text
-- of a chunk returning function(P, N), P a list of pointers (cdata), N of numbers (each sent as
-- a double). The caller keeps the memory P points to alive and the two kernels the same
-- arithmetic: each chunk then computes what it would on one thread.
function M.parallel(src, P, N, kernel, n, threads, align)
  if type(src) ~= 'string' then error('fusion_threads.parallel: kernel source text expected', 2) end
  local ptr, num = ffi.new('void *[?]', #P + 1), ffi.new('double[?]', #N + 1)
  for k, p in ipairs(P) do
    if type(p) ~= 'cdata' then error(('fusion_threads.parallel: pointer %d is a %s'):format(k, type(p)), 2) end
    ptr[k - 1] = p
  end
  for k, v in ipairs(N) do
    if type(v) ~= 'number' then error(('fusion_threads.parallel: number %d is a %s'):format(k, type(v)), 2) end
    num[k - 1] = v
  end
  serials = serials + 1
  local d = ffi.new('luabridge_fusion_kernel')
  d.serial, d.n, d.src, d.srclen, d.ctype = serials, n, src, #src, GENERIC
  d.nptr, d.ptr, d.nnum, d.num = #P, ptr, #N, num
  M.run(d, kernel, n, threads, align or 1)
  -- d and its arrays stay referenced until here (the workers read them while the job runs)
  return d, ptr, num, src
end

-- Runs kernel(lo, hi) over [0, n) in chunks (multiples of `align` elements) on `threads`
-- threads: this one and threads - 1 workers, which run the kernel d describes.
function M.run(d, kernel, n, threads, align)
  local t = teamOf(threads - 1)
  local per = math.ceil(n / (threads * M.CHUNKS_PER_THREAD) / align) * align
  lock(t.mutex)
  t.kernel, t.n, t.chunk, t.chunks = d, n, per, math.ceil(n / per)
  t.next, t.busy, t.failed, t.want = 0, 0, 0, threads
  t.generation = t.generation + 1
  t.runs = t.runs + 1
  broadcast(t.wake)
  local own = runChunks(t, kernel)
  while t.busy > 0 do wait(t.done, t.mutex) end
  t.kernel = nil
  local message = t.failed ~= 0 and ffi.string(t.message)
  unlock(t.mutex)
  if own ~= nil then error(own, 0) end
  if message then
    error((d.ctype == GENERIC and 'parallel loop' or 'fused group') .. ' (worker thread): ' .. message, 0)
  end
end

-- Stops this runtime's workers and waits for them (a later job starts new ones).
function M.stop()
  if not team or pid ~= getpid() then return end
  pthread.finish(team, pid, workers, guard)
  team, workers, pid, guard = nil, {}, nil, nil
end

-- The jobs this runtime has split over threads, and the chunks its workers ran (tests check
-- that the threaded path ran, and that the workers took part).
function M.runs()
  if not team then return 0, 0 end
  return tonumber(team.runs), tonumber(team.helped)
end

return M
