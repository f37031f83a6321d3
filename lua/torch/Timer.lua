-- torch.Timer: wall-clock (CLOCK_MONOTONIC), user and system CPU time (getrusage) of the process,
-- accumulated while running; and torch.tic() / torch.toc(t).
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'

-- Declared under private names (asm labels) so that other cdefs of these functions cannot clash.
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } luabridge_timespec;
typedef struct { long tv_sec; long tv_usec; } luabridge_timeval;
typedef struct { luabridge_timeval ru_utime, ru_stime; long ru_rest[16]; } luabridge_rusage;
int luabridge_clock_gettime(int clock, luabridge_timespec *ts) __asm__("clock_gettime");
int luabridge_getrusage(int who, luabridge_rusage *usage) __asm__("getrusage");
]]

local CLOCK_MONOTONIC = ffi.os == 'OSX' and 6 or 1
local RUSAGE_SELF = 0
local ts = ffi.new('luabridge_timespec')
local ru = ffi.new('luabridge_rusage')

local function realtime()
  ffi.C.luabridge_clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- user and system CPU seconds of the process
local function cputimes()
  ffi.C.luabridge_getrusage(RUSAGE_SELF, ru)
  return tonumber(ru.ru_utime.tv_sec) + tonumber(ru.ru_utime.tv_usec) * 1e-6,
         tonumber(ru.ru_stime.tv_sec) + tonumber(ru.ru_stime.tv_usec) * 1e-6
end

local function now()
  local user, sys = cputimes()
  return { real = realtime(), user = user, sys = sys }
end

local Timer = torch.class('torch.Timer')

-- Starts counting now (a new timer runs).
function Timer:__init()
  self._running = true
  self._total = { real = 0, user = 0, sys = 0 }
  self._start = now()
end

-- Back to zero; a running timer keeps running from now, a stopped one stays stopped.
function Timer:reset()
  self._total = { real = 0, user = 0, sys = 0 }
  self._start = now()
  return self
end

function Timer:stop()
  if self._running then
    local t = now()
    for k, v in pairs(self._total) do self._total[k] = v + t[k] - self._start[k] end
    self._running = false
  end
  return self
end

function Timer:resume()
  if not self._running then
    self._running = true
    self._start = now()
  end
  return self
end

-- {real, user, sys}: the seconds accumulated so far.
function Timer:time()
  local r = {}
  local t = self._running and now()
  for k, v in pairs(self._total) do r[k] = t and v + t[k] - self._start[k] or v end
  return r
end

function Timer:__tostring__()
  return ('torch.Timer [status: %s]'):format(self._running and 'running' or 'stopped')
end

-- tic() returns a mark (wall-clock seconds); toc(mark) the seconds since it, toc() those since
-- the last tic().
local lastTic
function torch.tic()
  lastTic = realtime()
  return lastTic
end

function torch.toc(mark)
  mark = mark or lastTic
  if type(mark) ~= 'number' then check.error('toc: expected a mark from torch.tic(), got ' .. torch.type(mark)) end
  return realtime() - mark
end

return Timer
