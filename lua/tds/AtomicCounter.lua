-- tds.AtomicCounter(): a counter with inc() (returns the value before), get() and set(v), atomic
-- across threads: its count sits beside a pthread mutex in memory every runtime can reach
-- (threads/handles.lua). threads.sharedserialize passes the counter itself to a pool's
-- workers; torch.save and threads.serialize write its value, as torch7's tds.
local ffi = require 'ffi'
local tdsObject = require 'tds.object'
local handles = require 'threads.handles'
local torchObject = require 'torch.core.object'

local contents = tdsObject.contents
local C = handles.C
local int64Ptr = ffi.typeof('int64_t *')

local Counter = {}
local methods = {}
local mt

local function over(handle)
  return { handle = handle, count = ffi.cast(int64Ptr, handle.ptr + handles.COUNTER_OFFSET) }
end

local function newHandle()
  return handles.new(function(ptr) C.luabridge_mutex_init(ptr, nil) end)
end

function Counter.__empty() return over(newHandle()) end

-- For threads.sharedserialize: the storage the counter lives in, and a counter over one.
function Counter.__sharedStorage(self) return contents[self].handle.storage end
function Counter.__fromSharedStorage(storage) return torchObject.new(mt, over(handles.fromStorage(storage))) end

function Counter.__index(_, key)
  local m = methods[key]
  if m == nil then error(('tds.AtomicCounter: no method <%s>'):format(tostring(key)), 2) end
  return m
end

-- fn(count pointer) with the counter's mutex held.
local function locked(self, fn, ...)
  local c = contents[self]
  C.luabridge_mutex_lock(c.handle.ptr)
  local result = fn(c.count, ...)
  C.luabridge_mutex_unlock(c.handle.ptr)
  return result
end

local function increment(count)
  local before = count[0]
  count[0] = before + 1
  return tonumber(before)
end
local function read(count) return tonumber(count[0]) end
local function write(count, value) count[0] = value end

function methods.inc(self) return locked(self, increment) end
function methods.get(self) return locked(self, read) end

function methods.set(self, value)
  if type(value) ~= 'number' or value % 1 ~= 0 then
    error(('tds.AtomicCounter:set: an integer expected, got %s'):format(tostring(value)), 2)
  end
  locked(self, write, value)
end

function Counter.__tostring(self) return 'tds.AtomicCounter=' .. self:get() end

function Counter.__write(self, file) file:writeLong(self:get()) end

function Counter.__read(self, file) locked(self, write, file:readLong()) end

local ctor
mt, ctor = tdsObject.class('tds.AtomicCounter', Counter, function(self) return self end)
return ctor
