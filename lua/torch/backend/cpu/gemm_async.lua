-- Float products on a second thread, beside the calling one (issue 25: the char-rnn LSTM's
-- products are too small for two threads to split one of them: 2.1M multiply-adds take 34 us
-- on one thread of oneDNN's matmul, 36 on two of OpenBLAS's, 68 on two of oneDNN's, whose
-- sleeping OpenMP workers take that long to wake; but a step has independent products, e.g. the
-- parameter gradients of its Linear nodes, which one thread can run while the other goes on).
--
-- One worker: a threads.Thread runtime of its own (it loads nothing but ffi) that takes jobs
-- in order from a queue in memory outside every Lua runtime (malloc'd, kept for the process:
-- a pthread mutex, two conditions, a ring of jobs) and runs each with oneDNN's dnnl_sgemm
-- (row-major; the worker asks OpenMP for one thread first), whose address the caller hands it.
-- After its last job the worker keeps checking the queue for M.spinSeconds (0 by default)
-- before it sleeps on the condition; asleep, it looks every second whether the thread of the
-- runtime that started it still runs, and ends once it has not (threads/pthread.lua; M.stop
-- and Python's luabridge.stop_workers() end it at once). The caller's wait runs every job the
-- worker has not taken yet itself, so a worker that is late, asleep or descheduled costs about
-- what running them here would. While it may run, a threaded BLAS call gets no thread on its CPU (blas.hold).
-- Off by default (M.enabled).
--
--   M.post(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)  row-major C = alpha op(A) op(B)
--     + beta C, queued (returns at once; false where no worker can run it: the caller runs it)
--   M.wait()    returns once every job posted has run, running those the worker has not taken
--     yet itself (raises the first failure's status)
--   M.pending(c)  whether a job not yet finished writes c (the caller must wait before using c)
--   M.busy()    whether a job posted has not finished;  M.queue(): the queue (its busyTime and
--     lateTime: the seconds the worker ran jobs and from post to start, summed; stolen: the
--     jobs the caller ran itself)
--
-- Operands must stay valid and untouched (c unread and unwritten by anyone else) until M.wait
-- returns. A forked child gets a queue and worker of its own.
local ffi = require 'ffi'

ffi.cdef [[
typedef struct {
  int64_t ta, tb, m, n, k, lda, ldb, ldc;
  double alpha, beta, postedAt;
  const float *a, *b;
  float *c;
} luabridge_gemm_job;
typedef struct {
  uint8_t mutex[64], wake[64], done[64];
  volatile int64_t posted, taken, finished, stop, sleeping, waiting, failed, stolen;
  int64_t owner, ownerStart;
  double spin, busyTime, lateTime;
  void *sgemm, *ompThreads;
  luabridge_gemm_job jobs[64];
} luabridge_gemm_queue;
typedef int (*luabridge_gemm_sgemm)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
  const float *, int64_t, float, float *, int64_t);
]]
local blas = require 'torch.backend.cpu.blas'
-- the pthread calls and the queue's control block (threads/pthread.lua: fusion_threads' team too)
local pthread = require 'threads.pthread'
local lock, unlock, signal, getpid = pthread.lock, pthread.unlock, pthread.signal, pthread.getpid
local SLOTS = 64
local ompThreadsType = ffi.typeof('void (*)(int)')

local M = {}

-- Whether callers may post: off unless LUABRIDGE_GEMM_ASYNC=1 (or set true). Measured on the
-- shared 2-core development VM (bench/lstm_threads.py --priority, char-rnn's training step at
-- 2 threads, A/B alternating, rounds of 3 steps): at load 7, best of 30 rounds 50.7 ms against
-- 51.3 with it off, median 55.1 against 60.7, CPU 55 against 63 ms a step (two more runs: best
-- 54.1 / 51.4 against 55.6 / 50.9, median 58.6 / 54.5 against 67.0 / 61.7); the forward in
-- evaluation best 12.9 against 13.1, median 15.4 against 14.4. Equal by the best figures, so not
-- the default. Tests turn it on to check both paths.
M.enabled = os.getenv('LUABRIDGE_GEMM_ASYNC') == '1'
-- How long the idle worker keeps looking for jobs before it sleeps. 0: it sleeps after each
-- job (a post wakes it; the caller runs what it has not taken by the wait). Spinning 2 ms put
-- the worker beside the caller on one CPU (a task that ran a moment ago is not moved): median
-- 57.7 ms against 55.1 at 0; 0.2 ms: 58.2.
M.spinSeconds = 0

local ts = ffi.new('luabridge_pthread_timespec')
local function now()
  pthread.clock(1, ts)
  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
end

local T, N = string.byte('T'), string.byte('N')
local function runJob(sgemm, j)
  return sgemm(j.ta ~= 0 and T or N, j.tb ~= 0 and T or N, j.m, j.n, j.k, j.alpha, j.a, j.lda,
    j.b, j.ldb, j.beta, j.c, j.ldc)
end

-- The worker's life (its own thread and runtime).
function M.work(address)
  local q = ffi.cast('luabridge_gemm_queue *', address)
  local sgemm = ffi.cast('luabridge_gemm_sgemm', q.sgemm)
  ffi.cast(ompThreadsType, q.ompThreads)(1)
  local job = ffi.new('luabridge_gemm_job')
  lock(q.mutex)
  while q.stop == 0 do
    if q.taken < q.posted then
      ffi.copy(job, q.jobs[q.taken % SLOTS], ffi.sizeof(job))   -- the slot is free once taken
      q.taken = q.taken + 1
      unlock(q.mutex)
      local t0 = now()
      local status = runJob(sgemm, job)
      local t1 = now()
      lock(q.mutex)
      q.busyTime, q.lateTime = q.busyTime + (t1 - t0), q.lateTime + (t0 - job.postedAt)
      if status ~= 0 and q.failed == 0 then q.failed = status end
      q.finished = q.finished + 1
      if q.waiting ~= 0 and q.finished == q.posted then signal(q.done) end
    else
      -- look without the mutex (the fields are volatile: LuaJIT reloads them on every pass)
      -- and without sched_yield (which hands the CPU to any other process there for its slice)
      local until_, seen = now() + q.spin, q.posted
      unlock(q.mutex)
      while q.posted == seen and q.stop == 0 and now() < until_ do end
      lock(q.mutex)
      if q.finished == q.posted and q.stop == 0 then
        q.sleeping = 1
        pthread.idle(q, 'posted', q.posted)   -- ends the worker once its runtime's thread has ended
        q.sleeping = 0
      end
    end
  end
  unlock(q.mutex)
end

local queue, worker, pid, guard = nil, nil, nil, nil
-- dnnl_sgemm and omp_set_num_threads, for the jobs the caller runs itself (cast once: every
-- cast to an anonymous function pointer type makes a new C type, and LuaJIT holds 64K)
local callerSgemm, callerOmpThreads

-- C targets of the jobs not known finished (address -> true), cleared by M.wait
local targets = {}

-- This process's queue with its worker started, or nil where none can run.
local function queueOf()
  local here = getpid()
  if pid == here and not (queue and queue.stop ~= 0) then return queue end
  if queue and pid == here then
    -- its worker ended (it found this runtime's thread gone: a function of this runtime called
    -- from another thread since): a new queue and worker
    M.wait()
    pthread.finish(queue, pid, { worker }, guard)
  end
  pid, queue, worker, targets, guard = here, nil, nil, {}, nil
  if M.startError then return nil end
  local ok, err = pcall(function()
    local dnnl = require 'torch.backend.cpu.dnnl'
    assert(dnnl.available and dnnl.lib, 'oneDNN is not loaded')
    local gomp = ffi.load('libgomp.so.1')
    local q = pthread.block('luabridge_gemm_queue', 'gemm on the second thread')
    pcall(ffi.cdef, [[int dnnl_sgemm(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
      const float *, int64_t, float, float *, int64_t);]])
    q.sgemm = ffi.cast('void *', dnnl.lib.dnnl_sgemm)
    q.ompThreads = ffi.cast('void *', gomp.omp_set_num_threads)
    callerSgemm = ffi.cast('luabridge_gemm_sgemm', q.sgemm)
    callerOmpThreads = ffi.cast(ompThreadsType, q.ompThreads)
    q.spin = M.spinSeconds
    local address = tonumber(ffi.cast('uintptr_t', q))
    worker = require('threads.Thread')(("require('torch.backend.cpu.gemm_async').work(%.0f)"):format(address))
    queue = q
    guard = pthread.guard(q, here)
    pthread.team(M.stop)
  end)
  if not ok then M.startError = tostring(err) end
  return queue
end

function M.post(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
  local q = M.enabled and queueOf()
  if not q then return false end
  lock(q.mutex)
  if q.posted - q.taken >= SLOTS then   -- the ring is full: the caller runs this one
    unlock(q.mutex)
    return false
  end
  local j = q.jobs[q.posted % SLOTS]
  j.ta, j.tb, j.m, j.n, j.k = ta and 1 or 0, tb and 1 or 0, m, n, k
  j.alpha, j.a, j.lda, j.b, j.ldb, j.beta, j.c, j.ldc = alpha, a, lda, b, ldb, beta, c, ldc
  j.postedAt = now()
  q.posted = q.posted + 1
  q.spin = M.spinSeconds
  -- the worker's CPU, while it runs this and looks for more, is no other product's
  blas.hold(1, M.spinSeconds + 1e-3)   -- the job's own time, then the spin
  if q.sleeping ~= 0 then signal(q.wake) end
  unlock(q.mutex)
  targets[tonumber(ffi.cast('uintptr_t', c))] = true
  M.posts = (M.posts or 0) + 1
  return true
end

-- Whether a job posted has not finished yet (read without the mutex).
function M.busy()
  local q = queue
  return q ~= nil and q.finished < q.posted and pid == getpid()
end

function M.pending(c)
  return targets[tonumber(ffi.cast('uintptr_t', c))] == true
end

-- Returns once every job posted has run: the caller runs those the worker has not taken yet
-- itself (so a worker that is late, descheduled or asleep costs no more than running them
-- here), then waits for the worker's (spinning a while first: it is usually near its end).
local callerJob = ffi.new('luabridge_gemm_job')
function M.wait()
  local q = queue
  if not q or pid ~= getpid() then return end
  lock(q.mutex)
  if q.taken < q.posted then
    local sgemm = callerSgemm
    callerOmpThreads(1)   -- this thread's OpenMP count (dnnl.run sets it per pass)
    while q.taken < q.posted do
      ffi.copy(callerJob, q.jobs[q.taken % SLOTS], ffi.sizeof(callerJob))
      q.taken = q.taken + 1
      q.stolen = q.stolen + 1
      unlock(q.mutex)
      local status = runJob(sgemm, callerJob)
      lock(q.mutex)
      if status ~= 0 and q.failed == 0 then q.failed = status end
      q.finished = q.finished + 1
    end
  end
  unlock(q.mutex)
  local until_, posted = now() + 2e-4, q.posted
  while q.finished < posted and now() < until_ do end
  lock(q.mutex)
  while q.finished < q.posted do
    q.waiting = 1
    pthread.wait(q.done, q.mutex)
  end
  q.waiting = 0
  local failed = q.failed
  q.failed = 0
  unlock(q.mutex)
  if next(targets) then targets = {} end
  if failed ~= 0 then
    error(('gemm on the second thread: dnnl_sgemm failed (status %d)'):format(tonumber(failed)), 2)
  end
end

function M.queue() return queue end

-- Stops this runtime's worker and waits for it (a later post starts a new one).
function M.stop()
  if not queue or pid ~= getpid() then return end
  M.wait()
  pthread.finish(queue, pid, { worker }, guard)
  queue, worker, pid, guard = nil, nil, nil, nil
end

return M
