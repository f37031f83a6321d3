-- BLAS and LAPACK for Float and Double data: the library numpy links (OpenBLAS in its wheels),
-- called through the FFI with no Python on the way. Python (luabridge/backend/linalg.py) only says once
-- where it is and how its symbols are named. Without such a library, BLAS runs as numpy calls
-- over the shared memory and LAPACK is unavailable.
--
-- Everything here is column-major, as BLAS: callers pass pointers, sizes, leading dimensions and
-- increments that they have already made valid (ld >= max(1, rows), inc > 0).
--
-- Threads: blas.threads is torch.setnumthreads' count (default: the cores this process may use).
-- Each call sets OpenBLAS's thread count first (a C store, about 2 ns), then puts the setting
-- back: a product gets one more thread per blas.minWork units (gemm: blas.gemmLeast), up to
-- blas.threads, so small ones stay on one thread; and no more threads than the machine has free CPUs (one
-- pread of /proc/loadavg's count of runnable threads, only for calls large enough to split):
-- OpenBLAS's threads wait on each other many times per product, so a split product stalls
-- whenever one of them is descheduled. LAPACK gets blas.threads. docs/performance.md (Threads)
-- has the measurements (bench/gemm_threads.py).
local ffi = require 'ffi'
local memory = require 'torch.core.memory'
local check = require 'torch.core.check'

local py = memory.py
local floor = math.floor
local blas = {}

-- The work each thread of a call gets at least: multiply-adds for gemm, matrix elements for gemv
-- and ger, vector elements for dot and axpy. Measured on 2 idle cores, best of 5 (bench/gemm_threads.py,
-- docs/performance.md, Threads): 2 threads pay for Double gemm from about 1M multiply-adds
-- (0.52M to 1.06M by shape; the LSTM's 50x128x512 products 0.57x to 0.75x at 3.3M); for Float
-- gemm, whose single thread is oneDNN's matmul, from about 8M (below, 2 OpenBLAS threads lose to
-- it: the LSTM's forward 45 -> 49 us), except where BLAS sees an n x k . (m x k)^T product
-- (ta false, tb true: row-major a^T . b, Linear's gradWeight) with k <= 64, from 1M (0.67x to
-- 0.92x from 1M to 4M: the LSTM's 512x128x50 gradWeight 46 -> 33 us). gemv pays from 1M elements
-- (138 -> 63 us at 1024^2; even at 512^2), dot never (even from 1M to 16M elements). axpy
-- (the SGD update params:add(-lr, grads), a training plan's gradient accumulation) pays from
-- 1M Float elements: 0.25 -> 0.17 ms at 1M, 3.66 -> 1.94 at 11.7M (ResNet-18's parameters), and
-- lost at 0.3M (0.052 -> 0.066), even at 0.67M (bench/serial_passes.lua's findings,
-- docs/performance.md "Serial fractions, pass by pass"); math.huge keeps it on one thread.
blas.minWork = { gemm = 4e6, gemmDouble = 5e5, gemmShortK = 5e5, shortK = 64, gemv = 5e5, vector = math.huge,
                 axpy = 5e5 }

-- The least multiply-adds per thread for a gemm of this type, transposes and k (as blas.gemm gets them).
function blas.gemmLeast(dt, ta, tb, k)
  local minWork = blas.minWork
  if dt.name == 'Double' then return minWork.gemmDouble end
  if not ta and tb and k <= minWork.shortK then return minWork.gemmShortK end
  return minWork.gemm
end

-- Float products of at least this many multiply-adds that stay on one thread run on oneDNN's
-- matmul (torch.backend.cpu.dnnl) when it is loaded: measured on one core, 0.77x OpenBLAS's
-- time from 64^3 to 128^3 (the char-rnn LSTM's 32x128 by 128x512: 56 -> 33 us), 0.88x at 256^3,
-- about even from 512^3 and at 32^3. Split over 2 threads it was no faster than OpenBLAS (0.91x
-- to 1.07x), so threaded products and all Double ones stay on OpenBLAS.
blas.dnnlGemmWork = 1e5

local ColMajor, NoTrans, Trans = 102, 111, 112

-- cblas prototypes; R is the element type, I the BLAS integer.
local cblas = {
  gemm = 'void %s(int, int, int, I, I, I, R, const R *, I, const R *, I, R, R *, I)',
  gemv = 'void %s(int, int, I, I, R, const R *, I, const R *, I, R, R *, I)',
  ger  = 'void %s(int, I, I, R, const R *, I, const R *, I, R *, I)',
  dot  = 'R %s(I, const R *, I, const R *, I)',
  axpy = 'void %s(I, R, const R *, I, R *, I)',
}

-- LAPACK (Fortran) arguments, all by reference: c char, i integer in, o integer out (returned
-- in order), I integer array, r real in, R real array. Each char adds a hidden length argument.
local lapackSpecs = {
  gesv  = 'i i R i I R i o',
  trtrs = 'c c c i i R i R i o',
  gels  = 'c i i i R i R i R i o',
  geev  = 'c c i R i R R R i R i R i o',
  syev  = 'c c i R i R R i o',
  gesvd = 'c c i i R i R R i R i R i o',
  getrf = 'i i R i I o',
  getri = 'i R i I R i o',
  potrf = 'c i R i o',
  potrs = 'c i i R i R i o',
  potri = 'c i R i o',
  pstrf = 'c i R i I o r R o',
  geqrf = 'i i R i R R i o',
  orgqr = 'i i i R i R R i o',
  ormqr = 'c c i i i R i R R i R i o',
}

local prefixOf = { Float = 's', Double = 'd' }

local function words(s)
  local r = {}
  for w in s:gmatch('%S+') do r[#r + 1] = w end
  return r
end

------------------------------------------------------------------------------------------------
-- through the FFI

local function bindLibrary(path, prefix, suffix, intBits, hasLapack)
  local INT = intBits == 64 and 'int64_t' or 'int'
  local lib = ffi.load(path)
  local decls, names = {}, {}
  local function declare(key, name, proto)
    names[key] = name
    decls[#decls + 1] = proto:format(name) .. ';'
  end
  for t, real in pairs({ s = 'float', d = 'double' }) do
    for op, proto in pairs(cblas) do
      declare(t .. op, prefix .. 'cblas_' .. t .. op .. suffix, (proto:gsub('R', real):gsub('I', INT)))
    end
    if hasLapack then
      for op, spec in pairs(lapackSpecs) do
        local args, hidden = {}, {}
        for _, k in ipairs(words(spec)) do
          if k == 'c' then
            args[#args + 1] = 'const char *'
            hidden[#hidden + 1] = 'size_t'
          else
            args[#args + 1] = (k == 'r' or k == 'R') and (real .. ' *') or (INT .. ' *')
          end
        end
        for _, h in ipairs(hidden) do args[#args + 1] = h end
        declare(t .. op, prefix .. t .. op .. '_' .. suffix, 'void %s(' .. table.concat(args, ', ') .. ')')
      end
    end
  end
  -- OpenBLAS's thread count (torch.setnumthreads); absent from other BLAS builds
  declare('setThreads', prefix .. 'openblas_set_num_threads' .. suffix, 'void %s(int)')
  declare('getThreads', prefix .. 'openblas_get_num_threads' .. suffix, 'int %s(void)')
  ffi.cdef(table.concat(decls, '\n'))
  local fn = {}
  for key, name in pairs(names) do
    local ok, f = pcall(function() return lib[name] end)   -- a build may lack some routines
    fn[key] = ok and f or nil
  end
  return fn, INT
end

------------------------------------------------------------------------------------------------
-- threads per call

-- Declared under private names (asm labels) so that other cdefs of these functions cannot clash.
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } luabridge_blas_timespec;
int luabridge_blas_clock_gettime(int clock, luabridge_blas_timespec *ts) __asm__("clock_gettime");
int luabridge_blas_open(const char *path, int flags) __asm__("open");
int luabridge_blas_close(int fd) __asm__("close");
int64_t luabridge_blas_pread(int fd, void *buf, size_t n, int64_t offset) __asm__("pread");
]]
local ts = ffi.new('luabridge_blas_timespec')
local function now()
  ffi.C.luabridge_blas_clock_gettime(1, ts)   -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- The workers of the last threaded call, which spin (runnable) until spinUntil.
local spinning, spinUntil = 0, 0

-- The CPUs a call may use now: the online CPUs less the machine's runnable threads other than
-- this one and its spinning workers (the fourth field of /proc/loadavg, "running/all"); nil
-- where that cannot be read.
local freeCpus
local loadavg = ffi.os == 'Linux' and ffi.C.luabridge_blas_open('/proc/loadavg', 0) or -1
if loadavg >= 0 then
  -- closed with this runtime (every threads worker has one): its finalizer runs at lua_close
  blas.loadavgFile = ffi.gc(ffi.new('int[1]', loadavg), function(fd) ffi.C.luabridge_blas_close(fd[0]) end)
  local buf = ffi.new('char[128]')
  freeCpus = function(foreign)
    local got = tonumber(ffi.C.luabridge_blas_pread(loadavg, buf, 127, 0))
    local running = got > 0 and tonumber(ffi.string(buf, got):match(' (%d+)/'))
    if not running then return nil end
    local others = running - 1
    if not foreign and spinning > 0 and now() < spinUntil then others = others - spinning end
    return blas.cpus - others
  end
end

-- CPUs that other threads of this process hold until heldUntil (gemm_async's worker while it
-- runs or waits for jobs): no call gets a thread there (blas.hold).
local heldCpus, heldUntil = 0, 0
function blas.hold(n, seconds)
  heldCpus, heldUntil = n, n > 0 and now() + seconds or 0
end

-- Whether calls count the free CPUs (a benchmark that has the machine to itself while other
-- work waits, by priority, may turn it off).
blas.watchLoad = true

-- The thread count for a call of `work` units, at least `least` per thread: 1 .. blas.threads,
-- and no more than the free CPUs. `foreign`: the call runs on another pool than OpenBLAS's
-- (oneDNN's OpenMP team, Python threads, the executor's team), for which OpenBLAS's workers
-- still spinning after a threaded product hold their CPUs: a second oneDNN thread woken beside
-- one took an MLP step at batch 256 from 5.9 to 16 ms on 2 cores (bench/real_models.py).
-- `holder`: the call is the one holding CPUs (blas.hold), which it does not count against itself.
function blas.threadsFor(work, least, foreign, holder)
  local n = blas.threads
  if n == 1 or work < 2 * least then return 1 end
  if heldCpus > 0 and not holder and now() < heldUntil then
    n = math.min(n, blas.cpus - heldCpus)
    if n <= 1 then return 1 end
  end
  -- a child forked after oneDNN's OpenMP team grew runs every pass on one thread (dnnl.lua)
  local dnnl = package.loaded['torch.backend.cpu.dnnl']
  if type(dnnl) == 'table' and dnnl.forkedChild and dnnl.forkedChild() then return 1 end
  if work < n * least then n = floor(work / least) end
  -- oneDNN's OpenMP workers spin a while after a multi-threaded pass (dnnl.lua): OpenBLAS's
  -- threads do not take their CPUs meanwhile (a oneDNN pass, foreign here, reuses them)
  if not foreign and type(dnnl) == 'table' and (dnnl.teamSpinning or 0) > 0
      and dnnl.now() < dnnl.teamSpinUntil then
    n = math.min(n, blas.cpus - dnnl.teamSpinning)
    if n <= 1 then return 1 end
  end
  if foreign and spinning > 0 and now() < spinUntil then
    n = math.max(1, math.min(n, blas.cpus - spinning))
  end
  local free = blas.watchLoad and freeCpus and freeCpus(foreign)
  if free and free < n then n = free > 1 and free or 1 end
  return n
end

-- After a call on n threads: its n - 1 workers spin for a while.
local function spun(n)
  if n > 1 then spinning, spinUntil = n - 1, now() + blas.spinSeconds end
end

local function ffiBlas(fn)
  local sgemm, dgemm, sgemv, dgemv = fn.sgemm, fn.dgemm, fn.sgemv, fn.dgemv
  local sger, dger, sdot, ddot = fn.sger, fn.dger, fn.sdot, fn.ddot
  local setThreads = fn.setThreads or function() end   -- a BLAS other than OpenBLAS
  local minWork = blas.minWork
  -- OpenBLAS's count for one call (returned); the setting is put back after it (for LAPACK
  -- and numpy) by restore. blas.threadsFor is looked up per call: bench/gemm_threads.py
  -- replaces it to time fixed counts.
  local function size(work, least)
    local n = blas.threadsFor(work, least)
    setThreads(n)
    return n
  end
  local function restore(used)
    if used ~= blas.threads then setThreads(blas.threads) end
    spun(used)
  end

  local dnnl   -- torch.backend.cpu.dnnl, required at the first product it may run (it requires this module)
  function blas.gemm(dt, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    local work, least = m * n * k, blas.gemmLeast(dt, ta, tb, k)
    if dt.name == 'Float' and alpha == 1 and work >= blas.dnnlGemmWork
        and blas.threadsFor(work, least) == 1 then
      dnnl = dnnl or require 'torch.backend.cpu.dnnl'
      if dnnl.enabled and dnnl.sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, 1) then return end
    end
    local f = dt.name == 'Double' and dgemm or sgemm
    local used = size(work, least)
    f(ColMajor, ta and Trans or NoTrans, tb and Trans or NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    restore(used)
  end
  function blas.gemv(dt, trans, m, n, alpha, a, lda, x, incx, beta, y, incy)
    local f = dt.name == 'Double' and dgemv or sgemv
    local used = size(m * n, minWork.gemv)
    f(ColMajor, trans and Trans or NoTrans, m, n, alpha, a, lda, x, incx, beta, y, incy)
    restore(used)
  end
  function blas.ger(dt, m, n, alpha, x, incx, y, incy, a, lda)
    local f = dt.name == 'Double' and dger or sger
    local used = size(m * n, minWork.gemv)
    f(ColMajor, m, n, alpha, x, incx, y, incy, a, lda)
    restore(used)
  end
  function blas.dot(dt, n, x, incx, y, incy)
    local f = dt.name == 'Double' and ddot or sdot
    local used = size(n, minWork.vector)
    local s = tonumber(f(n, x, incx, y, incy))
    restore(used)
    return s
  end
  -- y += alpha * x; only through the FFI (callers have a loop otherwise)
  local saxpy, daxpy = fn.saxpy, fn.daxpy
  if saxpy and daxpy then
    function blas.axpy(dt, n, alpha, x, incx, y, incy)
      local f = dt.name == 'Double' and daxpy or saxpy
      local used = size(n, minWork.axpy)
      f(n, alpha, x, incx, y, incy)
      restore(used)
    end
  end
end

-- lapack.NAME(dt, args...) calls ?NAME with plain Lua values for the i/c/r arguments and
-- returns the o outputs (info last).
local function ffiLapack(fn, INT)
  local lapack = {}
  local intArray = ffi.typeof(INT .. '[?]')
  for op, spec in pairs(lapackSpecs) do
    local kinds = words(spec)
    local nchar = 0
    for _, k in ipairs(kinds) do if k == 'c' then nchar = nchar + 1 end end
    lapack[op] = function(dt, ...)
      local f = fn[prefixOf[dt.name] .. op]
      if not f then check.error(('LAPACK routine %s%s is missing from %s'):format(prefixOf[dt.name], op, blas.library)) end
      local given = { ... }
      local args, outs, j = {}, {}, 1
      for i, k in ipairs(kinds) do
        if k == 'i' then
          args[i] = intArray(1, given[j]); j = j + 1
        elseif k == 'o' then
          args[i] = intArray(1); outs[#outs + 1] = args[i]
        elseif k == 'r' then
          args[i] = ffi.new(dt.ctype .. '[1]', given[j]); j = j + 1
        else
          args[i] = given[j]; j = j + 1
        end
      end
      for h = 1, nchar do args[#kinds + h] = 1 end
      blas.applyThreads()
      f(unpack(args, 1, #kinds + nchar))
      for i = 1, #outs do outs[i] = tonumber(outs[i][0]) end
      return unpack(outs)
    end
  end
  -- an integer array of n elements, for I arguments
  function lapack.ints(n) return intArray(math.max(n, 1)) end
  return lapack
end

------------------------------------------------------------------------------------------------
-- through numpy (fallback)

local TWO32 = 4294967296ULL

-- A pointer as two 32-bit halves, each exact as a Lua number.
local function split(p)
  local v = ffi.cast('uint64_t', p)
  return tonumber(v / TWO32), tonumber(v % TWO32)
end

local function numpyBlas()
  function blas.gemm(dt, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    local ah, al = split(a)
    local bh, bl = split(b)
    local ch, cl = split(c)
    py.blas_gemm(dt.name, ta, tb, m, n, k, alpha, ah, al, lda, bh, bl, ldb, beta, ch, cl, ldc)
  end
  function blas.gemv(dt, trans, m, n, alpha, a, lda, x, incx, beta, y, incy)
    local ah, al = split(a)
    local xh, xl = split(x)
    local yh, yl = split(y)
    py.blas_gemv(dt.name, trans, m, n, alpha, ah, al, lda, xh, xl, incx, beta, yh, yl, incy)
  end
  function blas.ger(dt, m, n, alpha, x, incx, y, incy, a, lda)
    local xh, xl = split(x)
    local yh, yl = split(y)
    local ah, al = split(a)
    py.blas_ger(dt.name, m, n, alpha, xh, xl, incx, yh, yl, incy, ah, al, lda)
  end
  function blas.dot(dt, n, x, incx, y, incy)
    local xh, xl = split(x)
    local yh, yl = split(y)
    return py.blas_dot(dt.name, n, xh, xl, incx, yh, yl, incy)
  end
end

------------------------------------------------------------------------------------------------

local path, prefix, suffix, intBits, hasLapack = py.blas_library()
-- the setting, the online CPUs, and how long OpenBLAS's workers may spin after a call (known
-- once blas_library has set their timeout)
blas.threads, blas.cpus, blas.spinSeconds = py.blas_threads()
if path then
  local fn, INT = bindLibrary(path, prefix, suffix, intBits, hasLapack)
  ffiBlas(fn)
  if hasLapack then blas.lapack = ffiLapack(fn, INT) end
  if fn.getThreads then   -- the count OpenBLAS holds between calls
    blas.libraryThreads = function() return tonumber(fn.getThreads()) end
  end
  -- a larger count grows OpenBLAS's pool: its new workers are made with SIGINT blocked
  local blockCtrlC = require('torch.backend.cpu.signals').blockCtrlC
  blas.applyThreads = function()
    if not fn.setThreads then return end
    local unblock = blockCtrlC()
    fn.setThreads(blas.threads)
    if unblock then unblock() end
  end
  blas.library = path
else
  numpyBlas()
  blas.applyThreads = function() end
end

-- torch.setnumthreads(n): the count every BLAS call may use from now on (n >= 1).
function blas.setThreads(n)
  blas.threads = n
  blas.applyThreads()
end
blas.applyThreads()

return blas
