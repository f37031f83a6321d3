-- torch.<Type>Storage: a typed, 1-based, resizable array over a numpy-owned buffer.
local ffi = require 'ffi'
local torch = require 'torch.env'
local dtype = require 'torch.core.dtype'
local memory = require 'torch.core.memory'
local check = require 'torch.core.check'
local object = require 'torch.core.object'
local versions = require 'torch.core.versions'

-- Every write below bumps the buffer's write version, and every raw pointer handed out marks it
-- escaped (core/versions.lua: what a plan's cached weights rely on).
local bump, escape = versions.bump, versions.escape

local Storage = {}     -- methods shared by every storage type
local byName = {}      -- 'torch.FloatStorage' -> metatable

local function isStorage(x)
  local mt = getmetatable(x)
  return type(mt) == 'table' and rawget(mt, '__storage') == true
end
torch.isStorage = isStorage
Storage.isStorage = isStorage

local function newStorage(mt, n)
  local dt = mt.__dtype
  local ptr, h, id, off = memory.alloc(n, dt)
  return object.new(mt, { _ptr = ptr, _n = n, _h = h, _id = id, _dt = dt, _base = false, _baseoff = off })
end

-- Reads element i (0-based) as a Lua number.
local function get(s, i)
  local v = s._ptr[i]
  if s._dt.int64 then return tonumber(v) end
  return v
end

local function checkIndex(s, i)
  if not check.isInt(i) then
    check.error('storage index must be an integer, got ' .. tostring(i))
  end
  if i < 1 or i > s._n then
    check.error(('index %d out of bounds for storage of size %d'):format(i, s._n))
  end
end

function Storage.size(s) return s._n end
function Storage.elementSize(s) return s._dt.size end
function Storage.data(s) escape(s); return s._ptr end
-- for the Python side's views of the memory (luabridge/core/memory.py): the buffer is viewed
function Storage._viewed(s) versions.viewed(s) end
function Storage.pointer(s) escape(s); return s._ptr end

-- One element set, then copied over the rest in doubling blocks: a few memcpy calls, not a Lua
-- loop per element (a 2^31-element storage fills in about a second).
function Storage.fill(s, v)
  local p, dt, n = s._ptr, s._dt, s._n
  if dt.half then check.error('fill: not supported for HalfStorage (copy from a FloatStorage)') end
  check.number('fill', v, 'value')
  if n == 0 then return s end
  bump(s)
  p[0] = v
  local done = 1
  while done < n do
    local k = math.min(done, n - done)
    ffi.copy(p + done, p, k * dt.size)
    done = done + k
  end
  return s
end

function Storage.zero(s) bump(s); if s._n > 0 then ffi.fill(s._ptr, s._n * s._dt.size, 0) end return s end

local function checkResizable(s)
  if s._base then check.error('resize: cannot resize a storage that views another storage') end
  if s._mapped then check.error(('resize: cannot resize a storage mapped from the file <%s>'):format(s._mapped)) end
end

-- Keeps the first min(old, n) elements; the rest are zero. Tensors on this storage see the
-- new memory, as in torch7.
function Storage.resize(s, n)
  check.int('resize', n, 'storage size', 0)
  if n == s._n then return s end
  checkResizable(s)
  bump(s)
  local ptr, h, id, off = memory.alloc(n, s._dt)
  local keep = math.min(n, s._n)
  if keep > 0 then ffi.copy(ptr, s._ptr, keep * s._dt.size) end
  s._ptr, s._h, s._id, s._n, s._baseoff = ptr, h, id, n, off
  return s
end

-- resize for a caller that overwrites every element before anything reads them (torch.load
-- reads a file straight in; a failed read discards the storage): the old contents are not kept
-- and a reused buffer is not zeroed first.
function Storage._resizeForOverwrite(s, n)
  if n == s._n then return s end
  checkResizable(s)
  bump(s)
  s._ptr, s._h, s._id, s._baseoff = memory.alloc(n, s._dt, true)
  s._n = n
  return s
end

function Storage.copy(s, src)
  if type(src) == 'table' and not isStorage(src) then
    if #src ~= s._n then check.error(('copy: size mismatch, storage %d vs table %d'):format(s._n, #src)) end
    -- checked before the first write: a failed copy leaves the storage as it was
    local values = {}
    for i = 1, #src do values[i] = check.element('copy', src[i], 'table entry ' .. i) end
    -- Half elements are bit patterns: the numbers convert through a float storage
    if s._dt.half then return s:copy(torch.FloatStorage(values)) end
    bump(s)
    for i = 1, #values do s._ptr[i - 1] = values[i] end
    return s
  end
  if not isStorage(src) then check.error('copy: expected a storage or a table') end
  if src._n ~= s._n then check.error(('copy: size mismatch, %d vs %d'):format(s._n, src._n)) end
  bump(s)
  if src._device then return src:_copyTo(s) end
  if src._dt == s._dt then
    if s._n > 0 then ffi.copy(s._ptr, src._ptr, s._n * s._dt.size) end
  elseif s._dt.half or src._dt.half then
    memory.py.copy_storage(s, src)
  else
    local dp, sp = s._ptr, src._ptr
    if src._dt.int64 then for i = 0, s._n - 1 do dp[i] = tonumber(sp[i]) end
    else for i = 0, s._n - 1 do dp[i] = sp[i] end end
  end
  return s
end

function Storage.totable(s)
  local t = {}
  if s._dt.half then
    local f = torch.FloatStorage(s._n):copy(s)
    return f:totable()
  end
  for i = 0, s._n - 1 do t[i + 1] = get(s, i) end
  return t
end

-- Byte and Char storages convert to and from Lua strings.
function Storage.string(s, str)
  if not (s._dt.name == 'Byte' or s._dt.name == 'Char') then
    check.error('string: only for ByteStorage and CharStorage')
  end
  if str == nil then return ffi.string(s._ptr, s._n) end
  check.string('string', str, 'str')
  s:resize(#str)
  bump(s)
  if #str > 0 then ffi.copy(s._ptr, str, #str) end
  return s
end

function Storage.type(s, name)
  if name == nil then return torch.typename(s) end
  if name == torch.typename(s) then return s end
  local mt = torch.getmetatable(name)
  if not mt or not rawget(mt, '__storage') then check.error('type: unknown storage type ' .. tostring(name)) end
  return (rawget(mt, '__alloc') or newStorage)(mt, s._n):copy(s)
end

-- unlink(2) from a finalizer: a shared-memory object goes when its storage does, as torch7's
ffi.cdef [[ int luabridge_unlink(const char *path) __asm__("unlink"); ]]
local function unlinkWhenCollected(path)
  return ffi.gc(ffi.new('char[?]', #path + 1, path), function(p) ffi.C.luabridge_unlink(p) end)
end

-- torch.<Type>Storage(filename[, shared[, size[, sharedMem]]]): the file's bytes, mapped (zero
-- copy). shared: writes reach the file; otherwise a private copy-on-write mapping. sharedMem
-- (with shared): filename names a POSIX shared-memory object, removed with the storage.
-- Mapped storages cannot be resized, as in torch7.
local function mapStorage(mt, filename, shared, size, sharedMem)
  local op = mt.__typename
  if rawget(mt, '__alloc') then check.error(op .. ': file mapping is for CPU storages') end
  if shared ~= nil and type(shared) ~= 'boolean' then
    check.error(op .. ': shared must be a boolean, got ' .. torch.type(shared))
  end
  local n = size == nil and 0 or check.int(op, size, 'size', 0)
  local path, shm = filename, shared and sharedMem
  if shm then path = '/dev/shm/' .. filename:gsub('^/+', '') end
  local ptr, h, id, count = memory.map(op, path, mt.__dtype, shared == true, n)
  -- escaped: the file (another mapping of it, another process) may change it
  return object.new(mt, { _ptr = ptr, _n = count, _h = h, _id = id, _dt = mt.__dtype, _base = false, _baseoff = 0,
                          _mapped = path, _unlink = shm and unlinkWhenCollected(path) or nil, _esc = true })
end

-- torch.<Type>Storage(...); mt.__alloc(mt, n), when set, makes the storages of another backend.
local function construct(mt, a, b, c, ...)
  local newStorage = rawget(mt, '__alloc') or newStorage
  if a == nil then return newStorage(mt, 0) end
  if type(a) == 'number' then
    check.int(mt.__typename, a, 'size', 0)
    local s = newStorage(mt, a)
    if b ~= nil then s:fill(b) end
    return s
  end
  if isStorage(a) then   -- a view of part of another storage of the same type
    if a._dt ~= mt.__dtype then check.error(mt.__typename .. ': cannot view a ' .. torch.typename(a)) end
    local offset = check.int(mt.__typename, b or 1, 'view offset', 1)
    local n = check.int(mt.__typename, c or (a._n - offset + 1), 'view size', 0)
    if offset - 1 + n > a._n then
      check.error(('%s: view [%d, %d] out of bounds of storage of size %d'):format(mt.__typename, offset, offset + n - 1, a._n))
    end
    -- _base is the storage owning the buffer, _baseoff this view's element offset into it. The
    -- view holds the buffer's handle: a later resize of the root gives the root a new buffer,
    -- and the old one must live as long as the view points into it.
    local root = a._base or a
    return object.new(mt, { _ptr = a._ptr and a._ptr + (offset - 1), _n = n, _h = root._h, _id = root._id, _dt = a._dt,
                            _base = root, _baseoff = a._baseoff + offset - 1 })
  end
  if type(a) == 'table' then
    local values = a
    for i = 1, #a do
      if type(a[i]) ~= 'number' then   -- numeric strings: a converted copy of the table
        if values == a then values = { unpack(a) } end
        values[i] = check.element(mt.__typename, a[i], 'table entry ' .. i)
      end
    end
    return newStorage(mt, #a):copy(values)
  end
  if type(a) == 'string' then return mapStorage(mt, a, b, c, ...) end
  check.error(mt.__typename .. ': expected nothing, a size, a table, a storage or a file name')
end

for _, dt in ipairs(dtype.list) do
  local name = dt.storage
  local mt = object.metatable(Storage)
  mt.__typename = name
  mt.__storage = true
  mt.__dtype = dt
  mt.__index = object.indexer(mt, function(s, k)
    if type(k) == 'number' then
      checkIndex(s, k)
      if dt.half then return s:totable()[k] end
      return get(s, k - 1)
    end
  end)
  mt.__newindex = object.setter(function(s, k, v)
    if type(k) ~= 'number' then check.error('storage index must be an integer, got ' .. type(k)) end
    checkIndex(s, k)
    if dt.half then check.error('HalfStorage: copy from a FloatStorage to set elements') end
    local value = check.element(name, v, 'value')
    bump(s)
    s._ptr[k - 1] = value
  end)
  mt.elementSize = function() return dt.size end   -- also called on the class, as torch7 allowed
  mt.__len = function(s) return s._n end
  mt.__tostring = function(s) return s:__tostring__() end   -- __tostring__: print.lua
  mt.__factory = function() return newStorage(mt, 0) end
  local ctor = setmetatable({}, {
    __index = mt, __newindex = mt,
    __call = function(_, ...) return construct(mt, ...) end,
  })
  mt.__constructor = ctor
  byName[name] = mt
  torch[dt.name .. 'Storage'] = ctor
  torch._registermetatable(name, mt)
end

-- A storage over a buffer the Python side registered (numpy memory shared with Lua).
function torch._storageFromBuffer(typeName, id, hi, lo, n)
  local mt = byName['torch.' .. typeName .. 'Storage']
  local dt = mt.__dtype
  local ptr = require('ffi').cast(dt.ptr, memory.address(hi, lo))
  -- escaped: Python (or the Lua state lending it) may write it, and another storage may view it
  return object.new(mt, { _ptr = ptr, _n = n, _h = memory.handle(id), _id = id, _dt = dt, _base = false, _baseoff = 0,
                          _esc = true })
end

torch._storageMetatables = byName
torch._constructStorage = construct
return Storage
