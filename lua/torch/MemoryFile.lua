-- torch.MemoryFile([storage][, mode]): a torch.File in a growable CharStorage. As in torch7 the
-- storage holds the contents plus a terminating zero byte; storage() returns it.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local bump = require('torch.core.versions').bump   -- writes into the storage bump its version
require 'torch.File'

local MemoryFile = torch.class('torch.MemoryFile', 'torch.File')

local modes = { r = { true, false }, w = { false, true }, rw = { true, true } }

function MemoryFile:__init(a, b)
  local storage, mode = nil, 'rw'
  if torch.typename(a) == 'torch.CharStorage' then storage, mode = a, b or 'rw'
  elseif a ~= nil then mode = a end
  local m = modes[mode]
  if not m then check.error(("torch.MemoryFile: bad mode %s ('r', 'w' or 'rw')"):format(tostring(mode))) end
  if storage then
    if storage._n == 0 or storage._ptr[storage._n - 1] ~= 0 then
      check.error('torch.MemoryFile: provided CharStorage must be terminated by 0')
    end
    self._size = storage._n - 1
  else
    storage = torch.CharStorage(1)
    self._size = 0
  end
  self._st, self._pos = storage, 0
  self:_initFile(m[1], m[2])
  self._functions = 'load'   -- in-process round trips (serialize, clone) load this runtime's functions
end

local function opened(self)
  if not self._st then check.error('attempt to use a closed file') end
  return self._st
end

function MemoryFile:isOpened() return self._st ~= nil end

function MemoryFile:_left() return self._size - self._pos end

function MemoryFile:_read(p, n)
  n = math.min(n, self._size - self._pos)
  if n <= 0 then return 0 end
  ffi.copy(p, self._st._ptr + self._pos, n)
  self._pos = self._pos + n
  return n
end

-- Writes at the position, growing the storage (doubling) past its end.
function MemoryFile:_write(p, n)
  if n <= 0 then return 0 end
  local st, stop = self._st, self._pos + n
  if stop + 1 > st._n then st:resize(math.max(stop + 1, 2 * st._n)) end
  bump(st)
  ffi.copy(st._ptr + self._pos, p, n)
  self._pos = stop
  if stop > self._size then
    self._size = stop
    st._ptr[stop] = 0
  end
  return n
end

function MemoryFile:_readBytes(n)
  n = math.min(n, self._size - self._pos)
  if n <= 0 then return '' end
  local s = ffi.string(self._st._ptr + self._pos, n)
  self._pos = self._pos + n
  return s
end

function MemoryFile:_getc()
  if self._pos >= self._size then return -1 end
  local c = self._st._ptr[self._pos]
  self._pos = self._pos + 1
  return c % 256
end

function MemoryFile:_ungetc() self._pos = self._pos - 1 end

-- An ascii token straight from the buffer (File:_readToken's contract).
local isSpace, maxToken = torch.File._isSpace, torch.File._maxToken
function MemoryFile:_readToken()
  local p, pos, size = self._st._ptr, self._pos, self._size
  while pos < size and isSpace(p[pos] % 256) do pos = pos + 1 end
  local start = pos
  while pos < size and not isSpace(p[pos] % 256) do
    if pos - start >= maxToken then error('read error: number longer than ' .. maxToken .. ' characters', 0) end
    pos = pos + 1
  end
  self._pos = pos
  if pos == start then return nil end
  return ffi.string(p + start, pos - start)
end

-- seek(pos): 1-based byte position, as torch7 (at most one past the end).
function MemoryFile:seek(pos)
  opened(self)
  if type(pos) ~= 'number' or pos < 1 then check.error('seek: position has to be greater than 0!') end
  if pos - 1 > self._size then
    self._hasError = true
    if not self._quiet then check.error(('unable to seek to position %d'):format(pos)) end
    return self
  end
  self._pos = pos - 1
  return self
end

function MemoryFile:seekEnd()
  opened(self)
  self._pos = self._size
  return self
end

function MemoryFile:position() opened(self) return self._pos + 1 end
function MemoryFile:synchronize() opened(self) return self end

function MemoryFile:close()
  opened(self)
  self._st = nil
  return self
end

-- The CharStorage holding the contents and a terminating zero (size() + 1 bytes).
function MemoryFile:storage()
  local st = opened(self)
  st:resize(self._size + 1)
  bump(st)
  st._ptr[self._size] = 0
  return st
end

return MemoryFile
