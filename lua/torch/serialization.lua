-- torch.save / torch.load / torch.serialize / torch.deserialize, and the write/read methods of
-- every storage and tensor type (torch7's layout: generic/Storage.c and generic/Tensor.c).
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local File = require 'torch.File'
require 'torch.DiskFile'
require 'torch.MemoryFile'
local cuda = require('torch.backend').load('cuda')   -- its tensor and storage types

-- The class version written with an object ("V <n>"): its class's __version, else 1.
function torch.version(obj)
  local mt = torch.getmetatable(torch.typename(obj) or '')
  return mt and rawget(mt, '__version') or 1
end

------------------------------------------------------------------------------------------------
-- storages: long size, then the elements

local Long = File._kinds.Long

local function hostStorage(s)
  if not s._device then return s end
  return torch[s._dt.host.name .. 'Storage'](s._n):copy(s)
end

local function writeStorage(s, file)
  local h = hostStorage(s)
  file:writeLong(h._n)
  file['write' .. h._dt.name](file, h)
end

local function readStorage(s, file)
  local host = s._device and s._dt.host or s._dt
  local n = File._readCount(file, 'storage size', File._minBytes(file, File._kinds[host.name]), file.readLong)
  if s._device then
    local h = torch[host.name .. 'Storage'](n)
    file['read' .. host.name](file, h)
    s:resize(n):copy(h)
  else
    s:_resizeForOverwrite(n)
    file['read' .. host.name](file, s)
  end
end

------------------------------------------------------------------------------------------------
-- tensors: int nDimension, long sizes[n], long strides[n], long storageOffset + 1, the storage

local function writeTensor(t, file)
  local nd = #t._sz
  file:writeInt(nd)
  file:_writeArray('Long', t._sz)
  file:_writeArray('Long', t._str)
  file:writeLong(t._off + 1)
  file:writeObject(t._st or nil)
end

local format = require 'torch.t7format'   -- the limits luabridge.t7 reads by too
local MAX_INDEX, MAX_DIMS = format.maxIndex, format.maxDims

local function badTensor(t, msg) error(torch.typename(t) .. ': ' .. msg, 0) end

-- The view (sizes, strides, 1-based offset) must lie inside the storage, whose type must match.
local function checkView(t, st, sz, str, off)
  for d = 1, #sz do
    if sz[d] < 0 or sz[d] > MAX_INDEX then badTensor(t, ('bad size %s at dimension %d'):format(tostring(sz[d]), d)) end
    if math.abs(str[d]) > MAX_INDEX then badTensor(t, ('bad stride %s at dimension %d'):format(tostring(str[d]), d)) end
  end
  local n, first, last = torch._viewExtent(sz, str, off)
  if n > MAX_INDEX then badTensor(t, 'too many elements') end
  if st ~= nil then
    if not torch.isStorage(st) or st._dt ~= t._dt then
      badTensor(t, ('storage must be a %s, got %s'):format(t._dt.storage, torch.type(st)))
    end
  end
  if off < 1 or off > MAX_INDEX then badTensor(t, 'bad storage offset ' .. tostring(off)) end
  if #sz > 0 and n > 0 then
    if st == nil then badTensor(t, ('%d elements but no storage'):format(n)) end
    if first < 0 or last >= st._n then
      badTensor(t, ('view of sizes %s, strides %s from offset %d needs %d elements but the storage has %d'):format(
        check.sizes(sz), table.concat(str, ','), off, last + 1, st._n))
    end
  end
end

local function readTensor(t, file)
  local nd = File._readCount(file, 'tensor dimension count', 2 * File._minBytes(file, Long), file.readInt)
  if nd > MAX_DIMS then badTensor(t, ('%d dimensions (at most %d)'):format(nd, MAX_DIMS)) end
  local sz = file:_readArray('Long', nd)
  local str = file:_readArray('Long', nd)
  local off = file:readLong()
  local st = file:readObject()
  checkView(t, st, sz, str, off)
  t._st, t._off, t._sz, t._str = st or false, st and off - 1 or 0, sz, str
end

local function install(mts, name, fn)
  for _, mt in pairs(mts) do mt[name] = fn end
end
install(torch._storageMetatables, 'write', writeStorage)
install(torch._storageMetatables, 'read', readStorage)
install(cuda.storageMetatables, 'write', writeStorage)
install(cuda.storageMetatables, 'read', readStorage)
torch._method('write', writeTensor)
torch._method('read', readTensor)
install(cuda.tensorMetatables, 'write', writeTensor)
install(cuda.tensorMetatables, 'read', readTensor)

------------------------------------------------------------------------------------------------
-- save / load

local longSizes = { b32 = 4, b64 = 8 }

-- (mode, referenced, options) from torch.load's optional arguments, given in any order.
local function loadArgs(op, ...)
  local mode, referenced, options
  for i = 1, select('#', ...) do
    local a = select(i, ...)
    if type(a) == 'string' then mode = a
    elseif type(a) == 'boolean' then referenced = a
    elseif type(a) == 'table' then options = a
    elseif a ~= nil then check.error(op .. ': bad argument ' .. tostring(a)) end
  end
  mode = mode or 'binary'
  if mode ~= 'binary' and mode ~= 'ascii' and not longSizes[mode] then
    check.error(op .. ': "binary", "b32", "b64" or "ascii" (or nil) expected for mode, got ' .. tostring(mode))
  end
  return mode, referenced ~= false, options
end

-- Sets a file's format: 'binary', 'ascii', 'b32' or 'b64' (binary with 4- or 8-byte longs).
local function setMode(file, mode)
  if mode == 'ascii' then return file:ascii() end
  file:binary()
  if longSizes[mode] then file:longSize(longSizes[mode]) end
  return file
end

-- Runs fn(file) and closes the file, also when fn fails.
local function using(file, fn)
  local ok, res = pcall(fn, file)
  if file:isOpened() then file:close() end
  if not ok then error(res, 0) end
  return res
end

-- openFile(op, path, mode[, shown]): shown is the name errors give (the file a temporary one stands for).
local function openFile(op, path, mode, shown)
  local file = torch.DiskFile(path, mode, true)
  if not file then
    check.error(('%s: cannot open <%s> in mode %s (%s)'):format(op, shown or path, mode, torch.DiskFile._openError))
  end
  return file:pedantic()
end

local py = rawget(_G, '__luabridge_py')   -- Python's os (luabridge/files.py): stat, chmod
ffi.cdef [[ int luabridge_getpid(void) __asm__("getpid"); ]]
local saves = 0   -- numbers this process's temporary files apart

-- The permission bits of an 'rwxr-x---' string.
local function permissionBits(text)
  local bits = 0
  for i = 1, 9 do
    if text:sub(i, i) ~= '-' then bits = bits + 2 ^ (9 - i) end
  end
  return bits
end

-- Runs write(name) on a file that replaces path only once write has succeeded: a temporary file
-- in path's folder, renamed over path (one atomic step) and given the old file's permissions, so
-- that a failure leaves the old file (or none) and no temporary file, never a truncated one. A
-- link or a file that is not a regular one (a device, a pipe) is written in place.
local function replacing(op, path, write)
  local old = py.file_stat(path, false)
  if old ~= nil and old.mode ~= 'file' then return write(path) end
  saves = saves + 1
  local folder, base = path:match('^(.*/)([^/]*)$')
  local temp = ('%s.%s.%d-%d.tmp'):format(folder or '', base or path, ffi.C.luabridge_getpid(), saves)
  local ok, err = pcall(function()
    write(temp)
    if old ~= nil then py.file_call('chmod', temp, permissionBits(old.permissions)) end
    local renamed, why = os.rename(temp, path)
    if not renamed then check.error(('%s: cannot replace <%s> (%s)'):format(op, path, why)) end
  end)
  if not ok then
    os.remove(temp)
    error(err, 0)
  end
end

-- torch.save(path, obj[, mode[, referenced]]): mode 'binary' (default), 'ascii', 'b32', 'b64'.
-- The file is replaced only once obj is written whole (see replacing).
function torch.save(path, obj, mode, referenced)
  if type(path) ~= 'string' then check.error('torch.save: file name (string) expected') end
  mode, referenced = loadArgs('torch.save', mode, referenced)
  replacing('torch.save', path, function(name)
    local file = setMode(openFile('torch.save', name, 'w', path), mode)
    file._op = 'torch.save'
    file:referenced(referenced)
    using(file, function(f) f:writeObject(obj) end)
  end)
end

-- torch.load(path[, mode][, referenced][, options]): options { unknownClasses = 'error'|'table',
-- functions = 'error'|'skip'|'load' } (torch.deserialize takes them too; its default is 'load').
function torch.load(path, ...)
  if type(path) ~= 'string' then check.error('torch.load: file name (string) expected') end
  local mode, referenced, options = loadArgs('torch.load', ...)
  local file = setMode(openFile('torch.load', path, 'r'), mode)
  file._op = 'torch.load'
  file:referenced(referenced)
  file:readOptions(options)
  return using(file, function(f) return f:readObject() end)
end

-- Writes obj into a memory file and returns take(its storage, the byte count).
local function serialized(obj, mode, take)
  mode = loadArgs('torch.serialize', mode)
  local file = setMode(torch.MemoryFile(), mode)
  file._op = 'torch.serialize'
  return using(file, function(f)
    f:writeObject(obj)
    return take(f._st, f._size)
  end)
end

-- torch.serializeToStorage(obj[, mode]): the bytes torch.save would write, as a CharStorage.
function torch.serializeToStorage(obj, mode)
  return serialized(obj, mode, function(st, n) return st:resize(n) end)
end

function torch.serialize(obj, mode)
  return serialized(obj, mode, function(st, n) return ffi.string(st._ptr, n) end)
end

-- The object in n bytes at p (a pointer or a string), read from one zero-terminated copy.
local function deserialized(p, n, ...)
  local mode, referenced, options = loadArgs('torch.deserialize', ...)
  local terminated = torch.CharStorage(n + 1)
  if n > 0 then ffi.copy(terminated._ptr, p, n) end
  local file = setMode(torch.MemoryFile(terminated, 'r'), mode)
  file._op = 'torch.deserialize'
  file:referenced(referenced)
  file:readOptions(options)
  return using(file, function(f) return f:readObject() end)
end

-- torch.deserializeFromStorage(storage[, mode][, options]) / torch.deserialize(str[, mode][, options])
function torch.deserializeFromStorage(storage, ...)
  if torch.typename(storage) == 'torch.CharTensor' then   -- torch7 read its argument as torch.CharTensor(x)
    local bytes = storage:contiguous()
    return deserialized(bytes:data(), bytes:nElement(), ...)
  end
  if torch.typename(storage) ~= 'torch.CharStorage' then
    check.error('torch.deserializeFromStorage: CharStorage expected, got ' .. torch.type(storage))
  end
  return deserialized(storage._ptr, storage._n, ...)
end

function torch.deserialize(str, ...)
  if type(str) ~= 'string' then check.error('torch.deserialize: string expected, got ' .. type(str)) end
  return deserialized(str, #str, ...)
end

torch.saveobj, torch.loadobj = torch.save, torch.load
return torch
