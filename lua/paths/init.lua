-- torch7's paths: portable file-name manipulation and directory functions (POSIX, through the
-- LuaJIT FFI). Results follow torch7's paths, e.g. concat makes absolute, '.'/'..'-free names.
local ffi = require 'ffi'

-- Private names (asm labels), so other cdefs of these functions cannot clash.
ffi.cdef [[
typedef struct luabridge_DIR luabridge_DIR;
luabridge_DIR *luabridge_opendir(const char *name) __asm__("opendir");
int luabridge_closedir(luabridge_DIR *d) __asm__("closedir");
int luabridge_mkdir(const char *name, unsigned int mode) __asm__("mkdir");
int luabridge_rmdir(const char *name) __asm__("rmdir");
int luabridge_access(const char *name, int mode) __asm__("access");
char *luabridge_getcwd(char *buf, size_t size) __asm__("getcwd");
char *luabridge_strerror(int errnum) __asm__("strerror");
]]
-- struct dirent up to the name, as glibc (Linux) and macOS (64-bit inodes) lay it out
if ffi.os == 'OSX' then
  ffi.cdef [[
  typedef struct { uint64_t d_ino, d_seekoff; uint16_t d_reclen, d_namlen; uint8_t d_type; char d_name[1024]; } luabridge_dirent;
  luabridge_dirent *luabridge_readdir(luabridge_DIR *d) __asm__("readdir$INODE64");
  ]]
else
  ffi.cdef [[
  typedef struct { uint64_t d_ino; int64_t d_off; uint16_t d_reclen; uint8_t d_type; char d_name[256]; } luabridge_dirent;
  luabridge_dirent *luabridge_readdir(luabridge_DIR *d) __asm__("readdir");
  ]]
end
local C = ffi.C

paths = rawget(_G, 'paths') or {}

local function checkString(fn, s, i)
  if type(s) ~= 'string' then
    error(('paths.%s: argument #%d must be a string, got %s'):format(fn, i or 1, type(s)), 3)
  end
end

-- nil, "name: reason", errno (as the C functions of torch7's paths)
local function failure(name)
  local errno = ffi.errno()
  return nil, name .. ': ' .. ffi.string(C.luabridge_strerror(errno)), errno
end

function paths.cwd()
  local buf = ffi.new('char[?]', 4096)
  if C.luabridge_getcwd(buf, 4096) == nil then return '.' end
  return ffi.string(buf)
end

function paths.filep(s)
  checkString('filep', s)
  return C.luabridge_access(s, 0) == 0 and not paths.dirp(s)
end

function paths.dirp(s)
  checkString('dirp', s)
  local d = C.luabridge_opendir(s)
  if d == nil then return false end
  C.luabridge_closedir(d)
  return true
end

-- The last non-empty component, without `suffix` (with or without its dot) when it ends so.
function paths.basename(s, suffix)
  checkString('basename', s)
  local base = s:match('([^/]+)/*$') or s:match('^/') and '/' or ''
  if suffix and suffix ~= '' then
    suffix = suffix:gsub('^%.', '')
    if suffix ~= '' and #base > #suffix + 1 and base:sub(-#suffix - 1) == '.' .. suffix then
      base = base:sub(1, -#suffix - 2)
    end
  end
  return base
end

-- Everything before the last separator that is followed by a name; '.' when there is none.
function paths.dirname(s)
  checkString('dirname', s)
  local last
  for i in s:gmatch('()/[^/]') do last = i end
  if not last then return s:sub(1, 1) == '/' and s or '.' end
  if last == 1 then return '/' end
  return s:sub(1, last - 1)
end

function paths.extname(s)
  checkString('extname', s)
  return s:match('%.([^%.]*)$')
end

-- Joins names onto the current directory: an absolute argument restarts from '/', '.' is
-- dropped and '..' removes the previous component. No argument: the current directory.
function paths.concat(...)
  local parts = {}
  for w in paths.cwd():gmatch('[^/]+') do parts[#parts + 1] = w end
  for i = 1, select('#', ...) do
    local s = select(i, ...)
    checkString('concat', s, i)
    if s:sub(1, 1) == '/' then parts = {} end
    for w in s:gmatch('[^/]+') do
      if w == '..' then parts[#parts] = nil elseif w ~= '.' then parts[#parts + 1] = w end
    end
  end
  return '/' .. table.concat(parts, '/')
end

-- Makes a directory and any missing parents: true, or nil, message, errno.
function paths.mkdir(s)
  checkString('mkdir', s)
  local parent = paths.dirname(s)
  if parent ~= s and not paths.dirp(parent) then paths.mkdir(parent) end
  if C.luabridge_mkdir(s, tonumber('777', 8)) ~= 0 then return failure(s) end
  return true
end

function paths.rmdir(s)
  checkString('rmdir', s)
  if C.luabridge_rmdir(s) ~= 0 then return failure(s) end
  return true
end

-- The entries of a directory ('.' and '..' included), or nil when it cannot be read.
function paths.dir(s)
  checkString('dir', s)
  local d = C.luabridge_opendir(s)
  if d == nil then return nil end
  local names = {}
  while true do
    local e = C.luabridge_readdir(d)
    if e == nil then break end
    names[#names + 1] = ffi.string(e.d_name)
  end
  C.luabridge_closedir(d)
  return names
end

-- Iterates over the entries of s; f filters them (a Lua pattern or a predicate).
function paths.files(s, f)
  if type(f) == 'string' then
    local pattern = f
    f = function(name) return name:find(pattern) end
  elseif f ~= nil and type(f) ~= 'function' then
    error('paths.files: the filter must be a pattern string or a function', 2)
  end
  local names, n = paths.dir(s) or {}, 0
  return function()
    repeat n = n + 1 until names[n] == nil or not f or f(names[n])
    return names[n]
  end
end

local function iterKind(keep)
  return function(s)
    return paths.files(s, function(name)
      return name ~= '.' and name ~= '..' and keep(paths.concat(s, name))
    end)
  end
end
paths.iterdirs = iterKind(paths.dirp)
paths.iterfiles = iterKind(function(p) return not paths.dirp(p) end)

-- Removes a file or a directory tree; the second argument must be 'yes'.
function paths.rmall(d, more)
  if more ~= 'yes' then return nil, "missing second argument ('yes')" end
  if paths.filep(d) then return os.remove(d) end
  if not paths.dirp(d) then return nil, 'not a file or directory', d end
  for name in paths.files(d) do
    if name ~= '.' and name ~= '..' then
      local full = paths.concat(d, name)
      local ok, msg = paths.rmall(full, more)
      if not ok then return ok, msg, full end
    end
  end
  return paths.rmdir(d)
end

-- A fresh temporary file name (made as an empty file); the files named are removed when the
-- Lua state closes, as torch7 does.
local tmpnames = { sweeper = newproxy(true) }   -- the sweeper lives as long as paths.tmpname
getmetatable(tmpnames.sweeper).__gc = function()
  for _, name in ipairs(tmpnames) do os.remove(name) end
end
function paths.tmpname()
  local name = os.tmpname()
  tmpnames[#tmpnames + 1] = name
  return name
end

-- The file running at stack level `depth` (2: the caller), absolute; with arg, arg taken
-- relative to that file's directory.
function paths.thisfile(arg, depth)
  local info = debug.getinfo(depth or 2, 'S')
  local s = info and info.source
  s = (type(s) == 'string' and s:sub(1, 1) == '@') and paths.concat(s:sub(2)) or nil
  if type(arg) == 'string' then s = s and paths.concat(paths.dirname(s), arg) or arg end
  return s
end

-- dofile with f relative to the directory of the calling file.
function paths.dofile(f, depth)
  local here = paths.thisfile(nil, 1 + (depth or 2))
  if here then f = paths.concat(paths.dirname(here), f) end
  return dofile(f)
end

function paths.uname()
  local p = io.popen('uname -s 2>/dev/null')
  local name = p and p:read('*l') or ''
  if p then p:close() end
  return name
end
function paths.is_win() return false end
function paths.is_mac() return ffi.os == 'OSX' end

paths.home = os.getenv('HOME') or '.'

-- The first of the named programs found on PATH.
function paths.findprogram(...)
  for _, exe in ipairs({ ... }) do
    for dir in (os.getenv('PATH') or '.'):gmatch('[^:]+') do
      local full = paths.concat(dir, exe)
      if paths.filep(full) then return full end
    end
  end
  return nil
end

return paths
