-- tds.AtomicCounter(): a counter with inc() (returns the value before), get() and set(v).
-- Jobs of the threads package run on one thread here, so plain arithmetic is atomic.
local tdsObject = require 'tds.object'
local File = require 'torch.File'

local contents = tdsObject.contents

local Counter = {}
local methods = {}

function Counter.__empty() return { count = 0 } end

function Counter.__index(_, key)
  local m = methods[key]
  if m == nil then error(('tds.AtomicCounter: no method <%s>'):format(tostring(key)), 2) end
  return m
end

function methods.inc(self)
  local c = contents[self]
  local before = c.count
  c.count = before + 1
  return before
end

function methods.get(self) return contents[self].count end

function methods.set(self, value)
  if type(value) ~= 'number' or value % 1 ~= 0 then
    error(('tds.AtomicCounter:set: an integer expected, got %s'):format(tostring(value)), 2)
  end
  contents[self].count = value
end

function Counter.__tostring(self) return 'tds.AtomicCounter=' .. contents[self].count end

function Counter.__write(self, file) file:writeLong(contents[self].count) end

function Counter.__read(self, file) contents[self].count = file:readLong() end

local _, ctor = tdsObject.class('tds.AtomicCounter', Counter, function(self) return self end)
return ctor
