-- Objects that several threads use at once (threads.Mutex, threads.Condition,
-- tds.AtomicCounter) live in memory that luabridge/threads.py allocates and finds again by
-- address: the address is the object's id (torch7's ids are its C pointers too), Kind(id) in
-- any runtime is the same object, and the memory lives while any runtime holds one. The
-- pthread calls go through the FFI: blocking in one holds no lock of Python's (lupa releases
-- the GIL while Lua runs).
local ffi = require 'ffi'
local transfer = require 'threads.transfer'
-- declares luabridge_mutex_* and luabridge_cond_* (pthread_mutex_init, ...) for ffi.C
require 'threads.pthread'

local py = rawget(_G, '__luabridge_py')
local handles = { C = ffi.C }
-- room for a pthread_mutex_t or pthread_cond_t (40 and 48 bytes on x86-64 and arm64 glibc) and
-- a counter after it
handles.BYTES = 128
handles.COUNTER_OFFSET = 64

local bytePtr = ffi.typeof('uint8_t *')

-- A handle: { storage = the ByteStorage over the memory, ptr = its address, id = as a number }.
local function handleOver(storage)
  local ptr = ffi.cast(bytePtr, storage:data())
  return { storage = storage, ptr = ptr, id = tonumber(ffi.cast('uintptr_t', ptr)) }
end

-- A new handle; init(ptr) sets up its memory (pthread_mutex_init, ...).
function handles.new(init)
  local h = handleOver(transfer.storages(py.threads_handle(handles.BYTES, nil))[1])
  init(h.ptr)
  return h
end

-- The handle whose id is id; kind names the object in the error for an id none has.
function handles.at(id, kind)
  if type(id) ~= 'number' then error(('threads.%s: id (a number) expected, got %s'):format(kind, type(id)), 3) end
  local flat = py.threads_handle(nil, id)
  if flat == nil then error(('threads.%s: none with id 0x%x (freed, or never made)'):format(kind, id), 3) end
  return handleOver(transfer.storages(flat)[1])
end

function handles.fromStorage(storage) return handleOver(storage) end

-- A class of handle objects, registered with torch as name: Class() makes one, Class(id) is
-- the one id names. Serialized, an object is its id (as torch7 passes them between threads).
function handles.class(name, methods, init)
  local kind = name:match('[^.]+$')
  local mt = { __typename = name, __index = methods, __version = 1 }
  function methods:id() return self._h.id end
  function methods:free() end   -- the memory goes with the last object over it
  mt.__tostring = function(self) return ('%s(0x%x)'):format(name, self._h.id) end
  mt.__write = function(self, f) f:writeDouble(self._h.id) end
  mt.__factory = function(f) return setmetatable({ _h = handles.at(f:readDouble(), kind) }, mt) end
  mt.__read = function() end
  torch._registermetatable(name, mt)
  return function(id)
    if id ~= nil then return setmetatable({ _h = handles.at(id, kind) }, mt) end
    return setmetatable({ _h = handles.new(init) }, mt)
  end
end

return handles
