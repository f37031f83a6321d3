-- The pthread and libc calls that the threads package and the worker teams built on it make
-- through the FFI, declared once per runtime (a second ffi.cdef of a name is an error), and the
-- life of a team's control block. Loads ffi alone: a worker's runtime may require it.
--
-- A control block is a struct in malloc'd memory (kept for the process: a worker may still read
-- it after its owner let it go) that begins with `uint8_t mutex[64], wake[64], done[64]` (a
-- pthread mutex and two conditions) and has `stop`, `owner` and `ownerStart` (int64_t); its
-- workers wait on `wake` and end once they see `stop`, or once the thread that owns the block
-- has ended (a runtime serves one thread: once that thread ended, no job can come; an idle
-- worker looks every P.WATCH_SECONDS). The two teams: luabridge/graph/fusion_threads.lua (fused
-- groups, parallel loops) and torch/backend/cpu/gemm_async.lua (products on a second thread).
--
--   P.block(ctype, what)          a zeroed ctype struct with its mutex and conditions set up,
--                                 owned by the calling thread
--   P.idle(b, field, seen)        a worker's wait on b.wake (the mutex held) for at most
--                                 P.WATCH_SECONDS; timed out with b[field] still `seen` (no job
--                                 came), sets b.stop where b's owner thread has ended
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
  clock = C.luabridge_pthread_clock,
}

-- Seconds an idle worker waits before it looks whether the thread that owns its block still runs.
P.WATCH_SECONDS = 1

-- The start time of thread tid of this process (field 22 of /proc/self/task/<tid>/stat), or
-- nil where it cannot be read (the thread ended; not Linux).
local function startOf(tid)
  local f = io.open(('/proc/self/task/%d/stat'):format(tid), 'r')
  if not f then return nil end
  local line = f:read('*l')
  f:close()
  -- the command in parentheses may hold spaces: fields from the last ')' on; state is field 3
  local rest = line and line:match('.*%)%s+(.*)')
  if not rest then return nil end
  local k = 2
  for field in rest:gmatch('%S+') do
    k = k + 1
    if k == 22 then return tonumber(field) end
  end
  return nil
end

-- Whether the thread that made block b has ended (false where that cannot be told).
local function ownerEnded(b)
  if b.owner == 0 then return false end
  return startOf(tonumber(b.owner)) ~= tonumber(b.ownerStart)
end

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
  local ok, tid = pcall(function() return C.luabridge_pthread_gettid() end)
  local start = ok and startOf(tid)
  if start then b.owner, b.ownerStart = tid, start end
  return b
end

local deadline = ffi.new('luabridge_pthread_timespec')
function P.idle(b, field, seen)
  C.luabridge_pthread_clock(0, deadline)   -- CLOCK_REALTIME, the condition's clock
  deadline.sec = deadline.sec + P.WATCH_SECONDS
  if C.luabridge_cond_timedwait(b.wake, b.mutex, deadline) ~= 0 and b[field] == seen and b.stop == 0 then
    -- timed out: read /proc without the mutex
    C.luabridge_mutex_unlock(b.mutex)
    local ended = ownerEnded(b)
    C.luabridge_mutex_lock(b.mutex)
    if ended then
      b.stop = 1
      C.luabridge_cond_broadcast(b.wake)
    end
  end
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
