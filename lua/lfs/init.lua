-- lfs: LuaFileSystem's API (attributes, dir, mkdir, rmdir, currentdir, chdir, touch, link,
-- symlinkattributes, setmode, lock), which Torch7 scripts load for checkpoint folders. The calls
-- go to Python's os module (luabridge/files.py), so stat needs no struct layouts here.
-- Failures return nil, message, errno as LuaFileSystem's do; lock/unlock always succeed (there
-- is one process per runtime).
local py = rawget(_G, '__luabridge_py')

lfs = rawget(_G, 'lfs') or {}
lfs._VERSION = 'LuaFileSystem 1.6.3 (luabridge)'

local function path(fn, p)
  if type(p) ~= 'string' then
    error(('lfs.%s: bad argument #1 (string expected, got %s)'):format(fn, type(p)), 3)
  end
  return p
end

local function attributes(fn, follow, p, request)
  local attrs, msg, errno = py.file_stat(path(fn, p), follow)
  if attrs == nil then
    return nil, ("cannot obtain information from file '%s': %s"):format(p, msg), errno
  end
  if type(request) == 'string' then
    local value = attrs[request]
    if value == nil and request ~= 'target' then
      error(("lfs.%s: invalid attribute name '%s'"):format(fn, request), 3)
    end
    return value
  elseif type(request) == 'table' then   -- fill the caller's table
    for k, v in pairs(attrs) do request[k] = v end
    return request
  end
  return attrs
end

function lfs.attributes(p, request) return attributes('attributes', true, p, request) end
function lfs.symlinkattributes(p, request) return attributes('symlinkattributes', false, p, request) end

-- for name in lfs.dir(p) do ... end; the second value is the directory object (next, close)
function lfs.dir(p)
  local names, msg = py.file_list(path('dir', p))
  if names == nil then error(('cannot open %s: %s'):format(p, msg), 2) end
  local i, closed = 0, false
  local dir = {}
  function dir.next()
    if closed then error('calling next on a closed directory', 2) end
    i = i + 1
    return names[i]
  end
  function dir.close() closed = true end
  dir.__index = dir
  return function() return dir.next() end, setmetatable({}, dir)
end

function lfs.mkdir(p) return py.file_call('mkdir', path('mkdir', p)) end
function lfs.rmdir(p) return py.file_call('rmdir', path('rmdir', p)) end
function lfs.chdir(p) return py.file_call('chdir', path('chdir', p)) end
function lfs.currentdir() return py.file_cwd() end
function lfs.touch(p, atime, mtime) return py.file_touch(path('touch', p), atime, mtime) end

function lfs.link(old, new, symlink)
  path('link', old)
  path('link', new)
  return py.file_call(symlink and 'symlink' or 'link', old, new)
end

-- Files are always binary on POSIX systems.
function lfs.setmode(file, mode) return true, 'binary' end
function lfs.lock(file, mode, start, length) return true end
function lfs.unlock(file, start, length) return true end

return lfs
