-- The pthread and libc calls that the threads package and the worker teams built on it make
-- through the FFI, declared once per runtime (a second ffi.cdef of a name is an error), and the
-- life of a team's control block. Loads ffi alone: a worker's runtime may require it.
--
-- A control block is a struct in malloc'd memory (kept for the process: a worker may still read
-- it after its owner let it go) that begins with `uint8_t mutex[64], wake[64], done[64]` (a
-- pthread mutex and two conditions) and has a `stop` flag; its workers wait on `wake` and end
-- once they see `stop`. The two teams: luabridge/graph/fusion_threads.lua (fused groups, parallel
-- loops) and torch/backend/cpu/gemm_async.lua (products on a second thread).
--
--   P.block(ctype, what)          a zeroed ctype struct with its mutex and conditions set up
--   P.release(b, owner)           stop b's workers without waiting for them (in process owner only)
--   P.guard(b, owner)             a cdata whose collection releases b (its runtime closed)
--   P.finish(b, owner, workers, guard)  release b, join each worker (w:free()), drop the guard
--   P.team(stop)                  registers a team's stop function with this runtime; P.stopAll()
--                                 ends every team this runtime started and waits for them
local ffi = require 'ffi'

ffi.cdef [[
int luabridge_mutex_init(void *m, const void *attr) __asm__("pthread_mutex_init");
int luabridge_mutex_lock(void *m) __asm__("pthread_mutex_lock");
int luabridge_mutex_unlock(void *m) __asm__("pthread_mutex_unlock");
int luabridge_cond_init(void *c, const void *attr) __asm__("pthread_cond_init");
int luabridge_cond_wait(void *c, void *m) __asm__("pthread_cond_wait");
int luabridge_cond_signal(void *c) __asm__("pthread_cond_signal");
int luabridge_cond_broadcast(void *c) __asm__("pthread_cond_broadcast");
typedef struct { long sec, nsec; } luabridge_pthread_timespec;
int luabridge_cond_timedwait(void *c, void *m, const luabridge_pthread_timespec *t) __asm__("pthread_cond_timedwait");
int luabridge_pthread_clock(int clock, luabridge_pthread_timespec *t) __asm__("clock_gettime");
int luabridge_pthread_getpid(void) __asm__("getpid");
int luabridge_pthread_gettid(void) __asm__("gettid");
void *luabridge_pthread_malloc(size_t n) __asm__("malloc");
]]
local C = ffi.C

local P = {
  C = C,
  lock = C.luabridge_mutex_lock,
  unlock = C.luabridge_mutex_unlock,
  wait = C.luabridge_cond_wait,
  timedwait = C.luabridge_cond_timedwait,
  signal = C.luabridge_cond_signal,
  broadcast = C.luabridge_cond_broadcast,
  getpid = C.luabridge_pthread_getpid,
  gettid = C.luabridge_pthread_gettid,
  clock = C.luabridge_pthread_clock,
}

function P.block(ctype, what)
  local size = ffi.sizeof(ctype)
  local raw = C.luabridge_pthread_malloc(size)
  if raw == nil then error(what .. ': out of memory', 2) end
  ffi.fill(raw, size)
  local b = ffi.cast(ctype .. ' *', raw)
  if C.luabridge_mutex_init(b.mutex, nil) ~= 0 or C.luabridge_cond_init(b.wake, nil) ~= 0
     or C.luabridge_cond_init(b.done, nil) ~= 0 then
    error(what .. ': pthread init failed', 2)
  end
  return b
end

-- Only the process that made b touches it: a forked child's copy of the mutex may be held by a
-- thread the child does not have.
function P.release(b, owner)
  if C.luabridge_pthread_getpid() ~= owner then return end
  C.luabridge_mutex_lock(b.mutex)
  b.stop = 1
  C.luabridge_cond_broadcast(b.wake)
  C.luabridge_mutex_unlock(b.mutex)
end

function P.guard(b, owner)
  return ffi.gc(ffi.new('char[1]'), function() P.release(b, owner) end)
end

function P.finish(b, owner, workers, guard)
  P.release(b, owner)
  for _, w in ipairs(workers) do w:free() end
  if guard then ffi.gc(guard, nil) end
end

local stops = {}
function P.team(stop)
  for _, s in ipairs(stops) do if s == stop then return end end
  stops[#stops + 1] = stop
end

function P.stopAll()
  for _, stop in ipairs(stops) do stop() end
end

return P
