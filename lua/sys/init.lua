-- torch7's sys: small system tools (clock, shell commands, colors, file tests).
require 'paths'
local ffi = require 'ffi'

sys = rawget(_G, 'sys') or {}

-- Wall-clock seconds since the epoch, with sub-second precision (gettimeofday).
ffi.cdef [[
typedef struct { long tv_sec; long tv_usec; } luabridge_sys_timeval;
int luabridge_gettimeofday(luabridge_sys_timeval *tv, void *tz) __asm__("gettimeofday");
int luabridge_usleep(unsigned int usec) __asm__("usleep");
]]
local tv = ffi.new('luabridge_sys_timeval')
function sys.clock()
  ffi.C.luabridge_gettimeofday(tv, nil)
  return tonumber(tv.tv_sec) + tonumber(tv.tv_usec) * 1e-6
end
sys.usleep = function(us) ffi.C.luabridge_usleep(us) end
function sys.sleep(seconds) sys.usleep(seconds * 1e6) end

-- matlab-like timers
local started
function sys.tic() started = sys.clock() end
function sys.toc(verbose)
  local dt = sys.clock() - (started or sys.clock())
  if verbose then print(dt) end
  return dt
end

local function trim(s) return (s:gsub('^%s*', ''):gsub('%s*$', '')) end

-- Runs a shell command and returns its output (stdout and stderr), trimmed.
function sys.execute(cmd)
  local p = io.popen(cmd .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  return trim(out)
end

-- The same through a temporary file (torch7 kept both for systems with a weak popen).
function sys.fexecute(cmd)
  local tmp = os.tmpname()
  os.execute(cmd .. ' 1>' .. tmp .. ' 2>&1')
  local f = assert(io.open(tmp))
  local out = f:read('*a')
  f:close()
  os.remove(tmp)
  return trim(out)
end

function sys.uname()
  local name = sys.execute('uname -a')
  if name:find('Linux') then return 'linux' end
  if name:find('Darwin') then return 'macos' end
  return '?'
end
sys.OS = sys.uname()

local function lister(flags)
  return function(d) return sys.execute('ls ' .. flags .. (d or '')) end
end
sys.ls, sys.ll, sys.la, sys.lla = lister(''), lister('-l '), lister('-a '), lister('-la ')

-- The directory and name of the calling file.
function sys.fpath()
  local src = debug.getinfo(2, 'S').source:gsub('^@', '')
  if src:sub(1, 1) ~= '/' then src = paths.concat(paths.cwd(), src) end
  return paths.dirname(src), paths.basename(src)
end

-- Splits str at each match of the Lua pattern pat (an empty leading piece is dropped, as torch7).
function sys.split(str, pat)
  local pieces, from = {}, 1
  while true do
    local s, e = str:find(pat, from)
    if not s or e < s then break end
    if s > 1 or from > 1 then pieces[#pieces + 1] = str:sub(from, s - 1) end
    from = e + 1
  end
  if from <= #str then pieces[#pieces + 1] = str:sub(from) end
  return pieces
end

function sys.isNaN(x) return x ~= x end

sys.filep, sys.dirp = paths.filep, paths.dirp
sys.dirname, sys.basename, sys.concat = paths.dirname, paths.basename, paths.concat

-- ANSI escape sequences: lower case normal, capitalised bold, '_' prefix background.
sys.COLORS = { none = '\27[0m' }
for i, name in ipairs { 'black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white' } do
  local code = 29 + i
  sys.COLORS[name] = '\27[0;' .. code .. 'm'
  sys.COLORS[name:sub(1, 1):upper() .. name:sub(2)] = '\27[1;' .. code .. 'm'
  sys.COLORS['_' .. name] = '\27[' .. (code + 10) .. 'm'
end

return sys
