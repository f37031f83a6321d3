-- Per-thread CPU clocks of this process (Linux), for attributing a step's time to its threads:
-- every thread's CPU time in nanoseconds (clock_gettime on the thread's CPU clock: its clock id
-- is ((~tid) << 3) | 6, which the kernel serves for threads of the calling process), unlike
-- /proc's stat fields, which count in 10 ms ticks.
--   local clocks = dofile('bench/thread_clocks.lua')
--   clocks.refresh()            -- list the process's threads again (new workers appear lazily)
--   local s = clocks.snapshot() -- { wall = seconds, main = CPU seconds, [tid] = CPU seconds, ... }
--   clocks.diff(s0, s1)         -- { wall, main, others, per = { [tid] = seconds } }
local ffi = require 'ffi'
local bit = require 'bit'
pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } thread_clocks_timespec;
int clock_gettime(int clk, thread_clocks_timespec *tp);
long syscall(long number, ...);
typedef struct thread_clocks_DIR thread_clocks_DIR;
thread_clocks_DIR *opendir(const char *name) __asm__("opendir");
int closedir(thread_clocks_DIR *d) __asm__("closedir");
struct thread_clocks_dirent { uint64_t d_ino; int64_t d_off; unsigned short d_reclen; unsigned char d_type; char d_name[256]; };
struct thread_clocks_dirent *readdir(thread_clocks_DIR *d) __asm__("readdir");
]])
local C = ffi.C
assert(ffi.os == 'Linux' and ffi.arch == 'x64', 'bench/thread_clocks.lua: Linux x86-64 only')
local ts = ffi.new('thread_clocks_timespec')

local M = {}
M.mainTid = tonumber(C.syscall(186))   -- gettid on x86-64
local tids, ids = {}, {}

local function read(id)
  if C.clock_gettime(id, ts) ~= 0 then return nil end
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function M.refresh()
  tids, ids = {}, {}
  local d = C.opendir('/proc/self/task')
  assert(d ~= nil, 'bench/thread_clocks.lua: cannot list /proc/self/task')
  while true do
    local e = C.readdir(d)
    if e == nil then break end
    local tid = tonumber(ffi.string(e.d_name))
    if tid and tid ~= M.mainTid then
      tids[#tids + 1] = tid
      ids[#ids + 1] = bit.bor(bit.lshift(bit.bnot(tid), 3), 6)
    end
  end
  C.closedir(d)
  return tids
end

function M.snapshot()
  local s = { wall = read(1), main = read(3) }   -- CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID
  for i = 1, #ids do s[tids[i]] = read(ids[i]) end
  return s
end

-- the time between two snapshots: wall, the calling thread's CPU, every other thread's CPU
-- (a thread that ended or started in between counts from what both snapshots hold)
function M.diff(a, b)
  local d = { wall = b.wall - a.wall, main = b.main - a.main, others = 0, per = {} }
  for tid, t in pairs(b) do
    if type(tid) == 'number' and a[tid] then
      local x = t - a[tid]
      d.per[tid], d.others = x, d.others + x
    end
  end
  return d
end

-- a thread's name (/proc/self/task/TID/comm)
function M.name(tid)
  local f = io.open(('/proc/self/task/%d/comm'):format(tid))
  if not f then return '?' end
  local n = f:read('*l')
  f:close()
  return n
end

return M
