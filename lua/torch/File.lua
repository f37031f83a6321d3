-- torch.File: torch7's typed reads and writes and its object serialisation format (.t7), over
-- the bytes a subclass provides (DiskFile, MemoryFile) through:
--   _read(ptr, n) / _write(ptr, n): raw bytes, returning the count moved
--   _getc() (a byte, or -1 at the end) / _ungetc(c): for ascii numbers
--   _left(): the bytes from the position to the end (readers check sizes against it)
-- and seek, seekEnd, position, close, isOpened, synchronize.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local dtype = require 'torch.core.dtype'
local bump = require('torch.core.versions').bump   -- a read into a storage bumps its version
local host = require('torch.backend').host   -- numpy's loops (ufunc_loop, ufunc_reduce)
local format = require 'torch.t7format'   -- limits, type codes, class names: shared with luabridge.t7.reader
local band = require('bit').band
require 'torch.class'

local File = torch.class('torch.File')

local types = format.types
local TYPE_NIL, TYPE_NUMBER, TYPE_STRING, TYPE_TABLE = types.NIL, types.NUMBER, types.STRING, types.TABLE
local TYPE_TORCH, TYPE_BOOLEAN, TYPE_FUNCTION = types.TORCH, types.BOOLEAN, types.FUNCTION
local TYPE_RECUR_FUNCTION = types.RECUR_FUNCTION
local LAST_TYPE = 0
for _, code in pairs(types) do LAST_TYPE = math.max(LAST_TYPE, code) end

File.maxDepth = format.maxDepth
local MAX_CLASSNAME, MAX_TOKEN = format.maxClassName, format.maxToken
local CLASS_NAME = '^[%w' .. format.classNamePunctuation:gsub('%p', '%%%0') .. ']+$'

-- Element kinds of the typed methods (read<Kind>, write<Kind>): the element types (C type,
-- size; an integer type's range) with how ascii files write them.
local kinds = {
  Byte   = { raw = true },
  Char   = { raw = true },
  Short  = { fmt = '%d' },
  Int    = { fmt = '%d' },
  Long   = { fmt = '%d', min = -2^53, max = 2^53 },   -- beyond: parseInteger
  Float  = { fmt = '%.9g' },
  Double = { fmt = '%.17g' },
  Half   = { fmt = '%.9g' },   -- bits in binary, the float in ascii
}
for name, k in pairs(kinds) do
  local dt = dtype[name]
  k.name, k.ct, k.size, k.ptr, k.vla = name, dt.ctype, dt.size, dt.ptr, ffi.typeof(dt.ctype .. '[?]')
  if dt.integer and not k.raw then k.min, k.max = k.min or dt.min, k.max or dt.max end
end
File._kinds = kinds

local scratch = ffi.new('union { uint8_t b; int8_t c; int16_t s; int32_t i; int64_t l; float f; double d; uint16_t h; }')
local scratchField = { Byte = 'b', Char = 'c', Short = 's', Int = 'i', Long = 'l', Float = 'f', Double = 'd', Half = 'h' }

-- Reused scratch arrays: a fresh array per call that only ffi.copy reads can be miscompiled
-- by LuaJIT's allocation sinking (its stores are dropped), so none is made per call.
local buffers = {}
local function buffer(k, n)
  local b = buffers[k]
  if not b or b.n < n then
    b = { n = math.max(n, 64), p = k.vla(math.max(n, 64)) }
    buffers[k] = b
  end
  return b.p
end
local CHUNK = 65536   -- elements converted per step between int64 and 4-byte longs

------------------------------------------------------------------------------------------------
-- state and flags

-- Subclasses call this from their constructors.
function File:_initFile(readable, writable)
  self._readable, self._writable = readable, writable
  self._binary, self._autoSpacing, self._quiet, self._hasError = false, true, false, false
  self._longSize = 0
  self._force = false
  self._options = {}
  self._functions = 'error'   -- what readObject does with functions when no option says
end

local function flagMethod(field, value)
  return function(self) self[field] = value; return self end
end
File.binary, File.ascii = flagMethod('_binary', true), flagMethod('_binary', false)
File.autoSpacing, File.noAutoSpacing = flagMethod('_autoSpacing', true), flagMethod('_autoSpacing', false)
File.quiet, File.pedantic = flagMethod('_quiet', true), flagMethod('_quiet', false)
File.clearError = flagMethod('_hasError', false)
function File:isBinary() return self._binary end
function File:isAutoSpacing() return self._autoSpacing end
function File:isQuiet() return self._quiet end
function File:hasError() return self._hasError end
function File:isReadable() return self._readable end
function File:isWritable() return self._writable end

-- longSize(4 | 8 | 0): the bytes of a `long` in binary mode (0: native, 8).
function File:longSize(size)
  if size ~= 0 and size ~= 4 and size ~= 8 then check.error('longSize: Invalid long size specified') end
  self._longSize = size
  return self
end

-- referenced(false): every object is written in full (no references), as torch7.
function File:referenced(ref)
  self._force = not ref
  return self
end
function File:isReferenced() return not self._force end

local optionValues = { unknownClasses = { error = true, table = true },
                       functions = { error = true, skip = true, load = true },
                       classLoader = { ['function'] = true } }   -- (by type)
-- readOptions(t): how readObject treats unknown classes and Lua functions (see docs/t7.md), and
-- classLoader: a function(name) the reader calls on meeting a class that no loaded package or
-- package of ours defines (code that may define it: the reader then looks for it again).
function File:readOptions(options)
  for k, v in pairs(options or {}) do
    local allowed = optionValues[k]
    if not allowed then check.error('readOptions: unknown option ' .. tostring(k)) end
    if not allowed[v] and not (k == 'classLoader' and type(v) == 'function') then
      check.error(('readOptions: bad value %s for option %s'):format(tostring(v), k))
    end
  end
  self._options = options or {}
  return self
end

local function checkOpen(self, reading)
  if not self:isOpened() then check.error('attempt to use a closed file') end
  if reading and not self._readable then check.error('attempt to read in a write-only file') end
  if reading == false and not self._writable then check.error('attempt to write in a read-only file') end
end

-- A short read: hasError, and an error unless the file is quiet.
local function shortRead(self, got, wanted)
  self._hasError = true
  if not self._quiet then error(('read error: read %d blocks instead of %d'):format(got, wanted), 0) end
end

------------------------------------------------------------------------------------------------
-- elements: n of kind k at pointer p

local function longBytes(self) return self._longSize == 4 and 4 or 8 end

-- The bytes one element takes at least in the file (ascii: a digit or raw char).
local function minBytes(self, k)
  if not self._binary then return 1 end
  return k.name == 'Long' and longBytes(self) or k.size
end
File._minBytes = minBytes

local function isSpace(c) return c == 32 or (c >= 9 and c <= 13) end

-- The next whitespace-delimited token (nil at the end); the delimiter stays unread.
-- Subclasses may override it with a faster scan.
function File:_readToken()
  local c = self:_getc()
  while isSpace(c) do c = self:_getc() end
  if c < 0 then return nil end
  local bytes = {}
  while c >= 0 and not isSpace(c) do
    if #bytes >= MAX_TOKEN then error('read error: number longer than ' .. MAX_TOKEN .. ' characters', 0) end
    bytes[#bytes + 1] = c
    c = self:_getc()
  end
  if c >= 0 then self:_ungetc(c) end
  return string.char(unpack(bytes))
end
File._isSpace, File._maxToken = isSpace, MAX_TOKEN
local function readToken(self) return self:_readToken() end

local int64 = ffi.typeof('int64_t')
local INT64_DIGITS = { ['-'] = '9223372036854775808', [''] = '9223372036854775807', ['+'] = '9223372036854775807' }

-- The index of a token's first character after an optional sign (byte loops: string.find
-- with a pattern would stop LuaJIT compiling the read loop).
local function afterSign(tok)
  local c = tok:byte(1)
  return (c == 43 or c == 45) and 2 or 1
end

-- An integer token: optional sign and digits, within the kind's range (nil otherwise).
local function parseInteger(tok, k)
  local v = tonumber(tok)
  if v == nil then return nil end
  for i = afterSign(tok), #tok do
    local c = tok:byte(i)
    if c < 48 or c > 57 then return nil end
  end
  if k.name == 'Long' and math.abs(v) >= 2^53 then   -- beyond doubles' exact integers: in int64
    local sign, digits = tok:match('^([+-]?)0*(%d+)$')
    local most = INT64_DIGITS[sign]
    if #digits > #most or (#digits == #most and digits > most) then return nil end
    local n = int64(0)
    for i = 1, #digits do n = n * 10 - (digits:byte(i) - 48) end   -- negative: -2^63 fits
    return sign == '-' and n or -n
  end
  if v < k.min or v > k.max then return nil end
  return v
end

-- A floating point token: decimal (with an exponent), inf, infinity or nan, signed or not;
-- not the hex and binary numbers LuaJIT's tonumber also reads (0x10, 0b1).
local function parseFloat(tok)
  local v = tonumber(tok)
  if v == nil then return nil end
  local i = afterSign(tok)
  local c = tok:byte(i + 1)
  if tok:byte(i) == 48 and (c == 120 or c == 88 or c == 98 or c == 66) then return nil end
  return v
end

-- A number token as element kind k reads it (nil when it is not one): the rules of luabridge.t7.
local function parseNumber(tok, k)
  if k.min then return parseInteger(tok, k) end
  return parseFloat(tok)
end

-- After the numbers of one read call, a newline is consumed when autoSpacing (as torch7).
local function endLine(self)
  local c = self:_getc()
  if c >= 0 and c ~= 10 then self:_ungetc(c) end
end

-- NaNs read in binary become the canonical NaN: LuaJIT reads a double from FFI memory as is, and
-- a negative NaN with a large payload (also a float or half one, widened) is the bit pattern of
-- a tagged Lua value (nil, or an object pointer), so a hostile file could forge Lua values.
local nanKinds = {
  Float = { words = 1, nan = 0x7FC00000, inf = 0x7F800000, mask = 0x7FFFFFFF, sig = 'ff->f', ct = 'int32_t *' },
  Half = { words = 1, nan = 0x7E00, inf = 0x7C00, mask = 0x7FFF, sig = 'ee->e', ct = 'uint16_t *' },
  Double = { words = 2, nan = 0x7FF80000, inf = 0x7FF00000, mask = 0x7FFFFFFF, sig = 'dd->d', ct = 'int32_t *' },
}
for _, c in pairs(nanKinds) do c.ptr, c.acc = ffi.typeof(c.ct), ffi.new('uint8_t[8]') end

-- Rewrites the NaNs among n elements (words p); true when there were any.
local function fixNaNs(c, p, n)
  local nan, inf, mask, found = c.nan, c.inf, c.mask, false
  if c.words == 1 then
    for i = 0, n - 1 do
      if band(p[i], mask) > inf then p[i], found = nan, true end
    end
  else   -- doubles as (low, high) 32-bit words, little-endian
    for i = 1, 2 * n - 1, 2 do
      local hi = band(p[i], mask)
      if hi > inf or (hi == inf and p[i - 1] ~= 0) then p[i], p[i - 1], found = nan, 0, true end
    end
  end
  return found
end

local NAN_CHUNK = 256 * 1024
local function canonicalizeNaNs(k, p, n)
  local c = nanKinds[k.name]
  if not c or n == 0 then return end
  -- numpy's SIMD maximum lets a NaN win: the element loop runs only when there is one
  local loop = n > 1 and host.ufunc_loop('maximum', c.sig)
  if loop then
    ffi.copy(c.acc, p, k.size)
    host.ufunc_reduce(loop, n, p, k.size, c.acc)
    if not fixNaNs(c, ffi.cast(c.ptr, c.acc), 1) then return end
  end
  fixNaNs(c, ffi.cast(c.ptr, p), n)
end

-- Reads n elements into p: the number read.
local function readElements(self, k, p, n)
  if n == 0 then return 0 end
  if self._binary then
    if k.name == 'Long' and self._longSize == 4 then
      local got = 0
      while got < n do
        local m = math.min(CHUNK, n - got)
        local tmp = buffer(kinds.Int, m)
        local r = math.floor(self:_read(tmp, 4 * m) / 4)
        for i = 0, r - 1 do p[got + i] = tmp[i] end
        got = got + r
        if r < m then break end
      end
      return got
    end
    if not nanKinds[k.name] then return math.floor(self:_read(p, k.size * n) / k.size) end
    -- floating point data in cache-sized pieces, each checked for NaNs while it is still in cache
    local got, per = 0, math.floor(NAN_CHUNK / k.size)
    while got < n do
      local m = math.min(per, n - got)
      local r = math.floor(self:_read(p + got, k.size * m) / k.size)
      canonicalizeNaNs(k, p + got, r)
      got = got + r
      if r < m then break end
    end
    return got
  end
  local got
  if k.raw then
    got = self:_read(p, n)
  elseif k.name == 'Half' then   -- ascii halves: floats, converted through numpy
    local f = torch.FloatStorage(n)
    got = readElements(self, kinds.Float, f._ptr, n)
    local h = torch.HalfStorage(n):copy(f)
    ffi.copy(p, h._ptr, 2 * n)
  else
    got = 0
    for i = 0, n - 1 do
      local tok = readToken(self)
      local v = tok and parseNumber(tok, k)
      if v == nil then break end
      p[i] = v
      got = got + 1
    end
  end
  if self._autoSpacing then endLine(self) end
  return got
end

local function formatElement(k, v)
  if k.name == 'Long' then return (tostring(int64(v)):gsub('LL$', '')) end
  return string.format(k.fmt, v)
end

-- Writes n elements from p; returns n.
local function writeElements(self, k, p, n)
  if n == 0 then return 0 end
  if self._binary then
    if k.name == 'Long' and self._longSize == 4 then
      for first = 0, n - 1, CHUNK do
        local m = math.min(CHUNK, n - first)
        local tmp = buffer(kinds.Int, m)
        for i = 0, m - 1 do tmp[i] = p[first + i] end
        self:_write(tmp, 4 * m)
      end
    else
      self:_write(p, k.size * n)
    end
    return n
  end
  if k.raw then
    self:_write(p, n)
  elseif k.name == 'Half' then
    local h = torch.HalfStorage(n)
    ffi.copy(h._ptr, p, 2 * n)
    writeElements(self, kinds.Float, torch.FloatStorage(n):copy(h)._ptr, n)
    return n
  else
    local sep = self._autoSpacing and ' ' or ''
    local LINE = 4096   -- elements formatted per write
    for first = 0, n - 1, LINE do
      local parts = {}
      for i = first, math.min(first + LINE, n) - 1 do parts[#parts + 1] = formatElement(k, p[i]) end
      local s = table.concat(parts, sep)
      if first + LINE < n then s = s .. sep end
      self:_write(s, #s)
    end
  end
  if self._autoSpacing then self:_write('\n', 1) end
  return n
end

-- One element as a Lua number, and a number into the scratch union.
local function scalarOut(k)
  local field = scratchField[k.name]
  if k.name == 'Long' then return function() return tonumber(scratch.l) end end
  if k.name == 'Half' then
    return function()
      local h = torch.HalfStorage(1)
      h._ptr[0] = scratch.h
      return torch.FloatStorage(1):copy(h)._ptr[0]
    end
  end
  return function() return scratch[field] end
end
local function scalarIn(k, v)
  if k.name == 'Half' then
    local h = torch.HalfStorage(1):copy(torch.FloatStorage({ v }))
    scratch.h = h._ptr[0]
  else
    scratch[scratchField[k.name]] = v
  end
end

-- read<Kind>(): one element; read<Kind>(n): a new storage of up to n; read<Kind>(storage): fills
-- it, returning the count. write<Kind>(number | storage).
for name, k in pairs(kinds) do
  local storageName = 'torch.' .. name .. 'Storage'
  local out = scalarOut(k)
  local dataPtr = function(s) return ffi.cast(k.ptr, s._ptr) end

  File['read' .. name] = function(self, arg)
    checkOpen(self, true)
    if arg == nil then
      scratch.l = 0
      local got = readElements(self, k, ffi.cast(k.ptr, scratch), 1)
      if got < 1 then shortRead(self, 0, 1) end
      return out()
    end
    if type(arg) == 'number' then
      if arg < 0 or arg ~= math.floor(arg) then check.error('read' .. name .. ': count must be a non-negative integer') end
      -- never allocate more than the file can hold
      local n = math.min(arg, math.floor(self:_left() / minBytes(self, k)))
      local s = torch[name .. 'Storage'](n)
      local got = readElements(self, k, dataPtr(s), n)
      if got < n then s:resize(got) end
      if got < arg then shortRead(self, got, arg) end
      return s
    end
    if torch.typename(arg) == storageName then
      local n = arg._n
      bump(arg)
      local got = readElements(self, k, dataPtr(arg), n)
      if got < n then shortRead(self, got, n) end
      return got
    end
    check.error('read' .. name .. ': nothing, number, or ' .. name .. 'Storage expected')
  end

  File['write' .. name] = function(self, arg)
    checkOpen(self, false)
    if type(arg) == 'number' then
      scalarIn(k, arg)
      writeElements(self, k, ffi.cast(k.ptr, scratch), 1)
      return
    end
    if torch.typename(arg) == storageName then
      return writeElements(self, k, dataPtr(arg), arg._n)
    end
    check.error('write' .. name .. ': number, or ' .. name .. 'Storage expected')
  end
end

function File:writeBool(v) self:writeInt(v and 1 or 0) end
function File:readBool() return self:readInt() == 1 end

-- Lua arrays of numbers as one typed batch (tensor sizes and strides).
function File:_writeArray(kindName, arr)
  local k = kinds[kindName]
  local n = #arr
  local buf = buffer(k, n)
  for i = 1, n do buf[i - 1] = arr[i] end
  writeElements(self, k, buf, n)
end

function File:_readArray(kindName, n)
  local k = kinds[kindName]
  local buf = buffer(k, n)
  local got = readElements(self, k, buf, n)
  if got < n then shortRead(self, got, n) end
  local arr = {}
  for i = 1, got do arr[i] = tonumber(buf[i - 1]) end
  return arr
end

-- Raw strings: writeString(s) returns #s; readString('*a') the rest, readString('*l') a line.
function File:writeString(s)
  checkOpen(self, false)
  if type(s) ~= 'string' then check.error('writeString: string expected, got ' .. type(s)) end
  self:_write(s, #s)
  return #s
end

function File:readString(format)
  checkOpen(self, true)
  if format ~= '*a' and format ~= '*l' then check.error("readString: format must be '*a' or '*l'") end
  if format == '*a' then
    local s = self:_readBytes(self:_left())
    if #s == 0 then shortRead(self, 0, 1) end
    return s
  end
  local bytes, c = {}, self:_getc()
  if c < 0 then shortRead(self, 0, 1); return '' end
  local parts = {}
  while c >= 0 and c ~= 10 do
    bytes[#bytes + 1] = c
    if #bytes == 4096 then parts[#parts + 1] = string.char(unpack(bytes)); bytes = {} end
    c = self:_getc()
  end
  parts[#parts + 1] = string.char(unpack(bytes))
  return table.concat(parts)
end

-- n raw bytes as a Lua string (fewer at the end of the file).
function File:_readBytes(n)
  if n == 0 then return '' end
  local buf = n <= CHUNK and buffer(kinds.Byte, n) or ffi.new('uint8_t[?]', n)
  local got = self:_read(buf, n)
  return ffi.string(buf, got)
end

------------------------------------------------------------------------------------------------
-- writeObject

-- The reader and writer recurse once per nesting level, and one Lua stack holds about 2000
-- levels: every SPLIT levels the recursion goes on in a fresh coroutine (its own stack).
local SPLIT = 256
local function onFreshStack(fn, a, b, c, d)
  local ok, res = coroutine.resume(coroutine.create(fn), a, b, c, d)
  if not ok then error(res, 0) end
  return res
end

-- A string from a file, shown in a message: bytes other than printable ASCII as \xNN.
local function printable(str)
  return (str:gsub('[^%w%p ]', function(c) return ('\\x%02x'):format(c:byte()) end))
end

-- "<?>.modules[3].weight" from a stack of keys; the root is named as torch7 names it: <?>, or
-- the debug name given to writeObject.
local KEY = {}   -- marks the key being read or written
local HIDDEN = {} -- a step left out of paths (the `value` field of a function's upvalue entry)
local ROOT = '<?>'
local function formatPath(stack, depth, root)
  local parts = { root or ROOT }
  for i = 1, depth do
    if depth > 24 and i == 9 then parts[#parts + 1] = ('...(%d levels)...'):format(depth - 16) end
    local key = (depth <= 24 or i <= 8 or i > depth - 8) and stack[i] or nil
    if key == KEY then parts[#parts + 1] = '.<key>'
    elseif key == HIDDEN then -- nothing
    elseif type(key) == 'table' and key.upvalue then parts[#parts + 1] = '.' .. tostring(key.upvalue)
    elseif type(key) == 'string' and key:match('^[%a_][%w_]*$') then parts[#parts + 1] = '.' .. key
    elseif type(key) == 'number' then parts[#parts + 1] = '[' .. tostring(key) .. ']'
    elseif type(key) == 'string' then parts[#parts + 1] = '["' .. printable(key:sub(1, 64)) .. '"]'
    elseif key ~= nil then parts[#parts + 1] = '[' .. torch.type(key) .. ']' end
  end
  return table.concat(parts)
end
File._formatPath = formatPath

local function getmethod(obj, name)
  local mt = torch.getmetatable(torch.typename(obj))
  if not mt then return nil end
  local ok, f = pcall(function() return mt['__' .. name] or mt[name] end)
  if ok and type(f) == 'function' then return f end
end

local function writableType(obj)
  local t = type(obj)
  if t == 'number' then return TYPE_NUMBER end   -- the common cases first
  if t == 'string' then return TYPE_STRING end
  if obj == nil then return TYPE_NIL end
  if t == 'boolean' then return TYPE_BOOLEAN end
  local name = torch.typename(obj)
  if name and torch.factory(name) then return TYPE_TORCH end
  if t == 'table' then return TYPE_TABLE end
  -- Lua functions (string.dump, which writeFunction calls, refuses C ones)
  if t == 'function' and debug.getinfo(obj, 'S').what ~= 'C' then return TYPE_RECUR_FUNCTION end
end

-- torch7's File:isWritableObject: the type code writeObject would use for obj, nil when it cannot
-- write it (a C function, a coroutine, userdata that is no torch object); classic.torch asks it
-- which fields of an object to keep.
function File:isWritableObject(obj)
  return writableType(obj)
end

local function writeState(self)
  local st = self._ws
  if not st then
    st = { index = {}, keep = {}, n = 0, path = {}, depth = 0, level = 0, upvalueIds = {}, nUpvalues = 0,
           upvalueLists = setmetatable({}, { __mode = 'k' }) }
    self._ws = st
  end
  return st
end

local function writeRawString(self, s)
  self:writeInt(#s)
  self:_write(s, #s)
  if #s > 0 and not self._binary and self._autoSpacing then self:_write('\n', 1) end
end

local writeValue
local function writeTorch(self, st, obj)
  writeRawString(self, format.versionPrefix .. tostring(torch.version(obj)))
  writeRawString(self, torch.typename(obj))
  local write = getmethod(obj, 'write')
  if write then return write(obj, self) end
  if type(obj) ~= 'table' then
    error(('<%s> is a non-serializable Torch object'):format(torch.typename(obj)), 0)
  end
  self:writeFields(obj)
end

-- Writes obj's fields (and extra ones) as one table, as torch7 writes an object without a write
-- method; fields of types the format cannot hold are left out with a warning, as torch7.
-- Write methods that add or drop fields call it too.
function File:writeFields(obj, extra)
  local fields = {}
  for k, v in pairs(obj) do
    if writableType(k) and writableType(v) then
      fields[k] = v
    else
      local st = self._ws
      io.stderr:write(('$ Warning: cannot write object field <%s> of <%s> %s\n'):format(
        tostring(k), torch.typename(obj), st and formatPath(st.path, st.depth, st.root) or ''))
    end
  end
  for k, v in pairs(extra or {}) do fields[k] = v end
  self:writeObject(fields)
end

-- Reads the table writeFields wrote into obj's fields (an untrusted file: it must be a plain
-- table, as luabridge.t7 requires).
function File:readFields(obj, className)
  local fields = self:readObject()
  if type(fields) ~= 'table' or torch.typename(fields) then
    error(('fields of <%s> are not a table'):format(className or torch.typename(obj)), 0)
  end
  for k, v in pairs(fields) do obj[k] = v end
end

-- A Lua function as torch7 writes it: its bytecode (string.dump, here LuaJIT 2.1's), then its
-- upvalues as a list of { name, id, value } (id: shared upvalues have the same id).
local function writeFunction(self, st, fn)
  writeRawString(self, string.dump(fn))
  local upvalues = {}
  for i = 1, math.huge do
    local name, value = debug.getupvalue(fn, i)
    if not name then break end
    local ref = debug.upvalueid(fn, i)
    if not st.upvalueIds[ref] then
      st.nUpvalues = st.nUpvalues + 1
      st.upvalueIds[ref] = st.nUpvalues
    end
    upvalues[i] = { name = name, id = st.upvalueIds[ref], value = value }
  end
  st.upvalueLists[upvalues] = true
  writeValue(self, st, upvalues)
end

-- A copy of Lua function fn, as a write and read back would make it, for in-memory deep copies
-- (nn.Module:clone): its bytecode loaded afresh, each upvalue's value copied by copy(value), and
-- upvalues that functions copied with the same `seen` share stay shared among the copies. seen
-- holds the copies by original (and the first copy of each upvalue by its debug.upvalueid).
-- C functions have no bytecode: they are returned as they are.
function File.copyFunction(fn, copy, seen)
  if seen[fn] ~= nil then return seen[fn] end
  if debug.getinfo(fn, 'S').what == 'C' then return fn end
  local c = loadstring(string.dump(fn))
  seen[fn] = c
  for i = 1, math.huge do
    local name, value = debug.getupvalue(fn, i)
    if not name then break end
    local id = debug.upvalueid(fn, i)
    local first = seen[id]
    if first then
      debug.upvaluejoin(c, i, first[1], first[2])
    else
      seen[id] = { c, i }
      debug.setupvalue(c, i, copy(value))
    end
  end
  return c
end

-- Sorts numbers, then strings, then booleans (false first), each ascending.
local keyRank = { number = 1, string = 2, boolean = 3 }
local function keyBefore(a, b)
  local ra, rb = keyRank[type(a)], keyRank[type(b)]
  if ra ~= rb then return ra < rb end
  if ra == 3 then return b and not a end
  return a < b
end

-- A table's keys in a fixed order: 1..n first, then the other numbers, strings and booleans
-- sorted, then any other keys as pairs gives them. LuaJIT 2.1 seeds its string hashes per state,
-- so pairs order alone would make the same object save to different bytes in two processes.
local function orderedKeys(obj)
  local keys, sortable, rest = {}, {}, {}
  local n = 0
  while obj[n + 1] ~= nil do n = n + 1; keys[n] = n end
  for k in pairs(obj) do
    if type(k) == 'number' and k >= 1 and k <= n and k % 1 == 0 then -- already listed
    elseif keyRank[type(k)] then sortable[#sortable + 1] = k
    else rest[#rest + 1] = k end
  end
  table.sort(sortable, keyBefore)
  for _, k in ipairs(sortable) do keys[#keys + 1] = k end
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  return keys
end

local function writeTable(self, st, obj)
  local keys = orderedKeys(obj)
  self:writeInt(#keys)
  local depth = st.depth + 1
  st.depth = depth
  -- paths name a function's upvalues as torch7's do: fn.upvalueName
  local upvalueList, parent = st.upvalueLists[obj], st.path[depth - 1]
  local upvalueEntry = type(parent) == 'table' and parent.upvalue
  for _, k in ipairs(keys) do
    local v = obj[k]
    st.path[depth] = KEY
    writeValue(self, st, k)
    if upvalueList then st.path[depth] = { upvalue = v.name }
    elseif upvalueEntry and k == 'value' then st.path[depth] = HIDDEN
    else st.path[depth] = k end
    writeValue(self, st, v)
  end
  st.path[depth] = nil
  st.depth = depth - 1
end

local writers = { [TYPE_TABLE] = writeTable, [TYPE_TORCH] = writeTorch, [TYPE_RECUR_FUNCTION] = writeFunction }

-- obj: what is written (the hook's result), key: the object references are kept by.
local function writeContainer(self, st, obj, code, key)
  local index = st.index[key]
  if index and not self._force then return self:writeInt(index) end
  st.n = st.n + 1
  if not self._force then st.index[key], st.keep[key] = st.n, obj end
  self:writeInt(st.n)
  local level = st.level + 1
  if level > File.maxDepth then
    error(('objects nested deeper than %d levels'):format(File.maxDepth), 0)
  end
  st.level = level
  if level % SPLIT == 0 then
    onFreshStack(writers[code], self, st, obj)
  else
    writers[code](self, st, obj)
  end
  st.level = level - 1
end

function writeValue(self, st, obj)
  local key = obj
  if st.hook then obj = st.hook(obj) end
  local code = writableType(obj)
  if code == nil then error(('Unwritable object <%s>'):format(type(obj)), 0) end
  self:writeInt(code)
  if code == TYPE_NUMBER then self:writeDouble(obj)
  elseif code == TYPE_BOOLEAN then self:writeBool(obj)
  elseif code == TYPE_STRING then writeRawString(self, obj)
  elseif code ~= TYPE_NIL then writeContainer(self, st, obj, code, key) end
end

-- Errors raised below the outermost call name the op and where the failing object sits.
local function located(self, st, msg)
  local root = st.root or ROOT
  local where = formatPath(st.path, st.depth, root)
  msg = tostring(msg)
  local op = self._op or (st == self._ws and 'writeObject' or 'readObject')
  if msg:find('(at ' .. root, 1, true) then return op .. ': ' .. msg end
  if msg:match('^is a ') then return ('%s: %s %s'):format(op, where, msg) end
  if st == self._rs then   -- readers also say where in the file
    local ok, pos = pcall(self.position, self)
    if ok then where = ('%s, byte %d'):format(where, pos - 1) end
  end
  return ('%s: %s (at %s)'):format(op, msg, where)
end

-- writeObject(obj[, debugname[, hook]]): nil, numbers, strings, booleans, tables, torch objects
-- and Lua functions; an object met again is written as a reference to its first copy (unless
-- referenced(false)). Errors name where the object sits from debugname (default <?>).
-- hook(obj), when given, returns what to write in place of each object.
function File:writeObject(obj, debugname, hook)
  checkOpen(self, false)
  local st = writeState(self)
  if st.active then return writeValue(self, st, obj) end
  st.active, st.hook, st.root = true, hook, debugname ~= nil and tostring(debugname) or nil
  local ok, err = pcall(writeValue, self, st, obj)
  st.active, st.hook = false, nil
  if not ok then
    if __luabridge_interrupt(err) then st.path, st.depth, st.level = {}, 0, 0; error(err, 0) end
    local msg = located(self, st, err)
    st.path, st.depth, st.level = {}, 0, 0
    check.error(msg)
  end
end

------------------------------------------------------------------------------------------------
-- readObject

local function readState(self)
  local st = self._rs
  if not st then
    st = { objects = {}, kinds = {}, n = 0, path = {}, depth = 0, level = 0 }
    self._rs = st
  end
  return st
end

local SKIPPED = {}   -- the reference of a function read with functions = 'skip'

-- A count read from the file, checked against the bytes left (each item takes >= perItem).
local function readCount(self, what, perItem, readFn)
  local n = (readFn or self.readInt)(self)
  if n < 0 or n ~= math.floor(n) then error(('bad %s %s'):format(what, tostring(n)), 0) end
  local left = self:_left()
  if n * perItem > left then
    error(('%s %d needs at least %d bytes but only %d are left'):format(what, n, n * perItem, left), 0)
  end
  return n
end
File._readCount = readCount

-- A string as writeObject writes it: its length, then its bytes (raw in ascii too).
local function readRawString(self, what)
  local n = readCount(self, what, 1)
  local s = self:_readBytes(n)
  if #s < n then shortRead(self, #s, n) end
  if n > 0 and not self._binary and self._autoSpacing then endLine(self) end
  return s
end

local readValue

-- The class our code reads a file's class name as: CUDA types as CPU ones without a usable
-- CUDA backend, then torch.File.classAliases for names we have no class of.
local cudaUsable

local function resolveClass(name)
  local cudaHost = name:match('^torch%.Cuda(%a*)Tensor$') or name:match('^torch%.Cuda(%a*)Storage$')
  if cudaHost then
    if cudaUsable == nil then cudaUsable = pcall(torch.CudaStorage, 1) end
    if not cudaUsable then
      local kind = name:match('(%a+)$'):match('Tensor$') and 'Tensor' or 'Storage'
      local host = 'torch.' .. (cudaHost == '' and 'Float' or cudaHost) .. kind
      return torch.factory(host) and host or nil   -- torch.CudaXStorage: no such class
    end
  end
  if name:match('^torch%.%a*File$') then return nil end   -- files hold raw handles: never from a file
  if torch.factory(name) then return name end
  local alias = File.classAliases[name]
  if alias and torch.factory(alias) then return alias end
end
File._resolveClass = resolveClass
File.classAliases = {}

-- The package of ours that defines class `name` (t7format's classPackages, prefixPackages),
-- when it is not loaded yet.
local function packageFor(name)
  local pkg = format.classPackages[name] or format.prefixPackages[name:match('^(%w+)%.') or '']
  if pkg and package.loaded[pkg] == nil then return pkg end
end

-- resolveClass, requiring the package of ours that defines the class first when it is not
-- loaded, else calling the classLoader option: a file is read once, learning the classes it
-- needs as it meets them (torch7 failed on a class of a package not required yet). Nil when
-- nothing provides the class.
local function classOf(self, name)
  local resolved = resolveClass(name)
  if resolved or File.tableReaders[name] then return resolved end
  local pkg = packageFor(name)
  if pkg then
    local ok, err = pcall(require, pkg)
    if not ok then
      if __luabridge_interrupt(err) then error(err, 0) end
      error(("class <%s> needs package '%s', which failed to load: %s"):format(name, pkg, tostring(err)), 0)
    end
    resolved = resolveClass(name)
  end
  local loader = self._options.classLoader
  if resolved or not loader then return resolved end
  loader(name)
  return resolveClass(name)
end

-- Classes read into plain Lua values when no class of ours has the name: tds containers.
-- reader(file, obj, version) fills the table obj.
File.tableReaders = {
  ['tds.Hash'] = function(file, obj)
    local n = readCount(file, 'tds.Hash size', 2 * minBytes(file, kinds.Int), file.readLong)
    for _ = 1, n do
      local k = file:readObject()
      if k == nil or k ~= k then error('tds.Hash key is nil or nan', 0) end
      obj[k] = file:readObject()
    end
  end,
  ['tds.Vec'] = function(file, obj)
    local n = readCount(file, 'tds.Vec size', minBytes(file, kinds.Int), file.readLong)
    for i = 1, n do obj[i] = file:readObject() end
  end,
}

local function readTorch(self, st, index)
  local version = readRawString(self, 'class version string length')
  local prefix = format.versionPrefix
  local versionText = version:sub(1, #prefix) == prefix and version:sub(#prefix + 1):match('^(%S+)$')
  local versionNumber = versionText and parseFloat(versionText)
  if versionNumber and (versionNumber ~= versionNumber or math.abs(versionNumber) == 1 / 0) then
    versionNumber = nil   -- (luabridge.t7 takes finite versions only)
  end
  local className = version
  if versionNumber then
    className = readRawString(self, 'class name length')
  else
    versionNumber = 0   -- files from before torch7 had versions
  end
  if #className == 0 or #className > MAX_CLASSNAME or not className:match(CLASS_NAME) then
    error(('bad class name "%s"'):format(printable(className:sub(1, 64))), 0)
  end
  local resolved = classOf(self, className)
  local tableReader = not resolved and File.tableReaders[className]
  if not resolved and not tableReader then
    if self._options.unknownClasses ~= 'table' then
      error(('unknown Torch class <%s> (read it as a table with the option unknownClasses = \'table\')'):format(
        className), 0)
    end
  end
  local obj
  if resolved then obj = torch.factory(resolved)(self) else obj = {} end
  if index then st.objects[index] = obj end
  if tableReader then
    tableReader(self, obj, versionNumber)
    return obj
  end
  if not resolved then
    self:readFields(obj, className)
    obj.__typename, obj.__version = className, versionNumber
    return obj
  end
  local read = getmethod(obj, 'read')
  if read then
    read(obj, self, versionNumber)
  elseif type(obj) == 'table' then
    self:readFields(obj, className)
  else
    error(('cannot load object class <%s>'):format(className), 0)
  end
  return obj
end

local function readTable(self, st, index)
  local n = readCount(self, 'table size', 2 * minBytes(self, kinds.Int))
  local obj = {}
  if index then st.objects[index] = obj end
  local depth = st.depth + 1
  st.depth = depth
  for _ = 1, n do
    st.path[depth] = KEY
    local k = readValue(self, st)
    if k == nil or k ~= k then error('table key is nil or nan', 0) end
    st.path[depth] = k
    obj[k] = readValue(self, st)
  end
  st.path[depth] = nil
  st.depth = depth - 1
  return obj
end

-- What bytecode is, from its header, and whether this runtime loads it: LuaJIT bytecode of
-- the version, byte order and GC64 mode of what this runtime's string.dump writes.
local OWN_HEADER = string.dump(function() end)
local function bytecodeKind(code)
  local version, flags = code:byte(4, 5)
  if code:sub(1, 3) == '\27LJ' and flags then
    local name = (format.luajitVersions[version] or ('LuaJIT (bytecode version %d)'):format(version)) .. ' bytecode'
    local mask = format.luajitFlagBigEndian + format.luajitFlagGC64
    local loadable = version == OWN_HEADER:byte(4) and band(flags, mask) == band(OWN_HEADER:byte(5), mask)
    if band(flags, format.luajitFlagBigEndian) ~= 0 then name = 'big-endian ' .. name
    elseif version == 2 and band(flags, format.luajitFlagGC64) == 0 then name = format.luajitNoGC64 end
    return name, loadable
  end
  if code:sub(1, 4) == '\27Lua' and flags then
    return ('Lua %d.%d bytecode'):format(math.floor(flags / 16), flags % 16), false
  end
  return 'not bytecode', false
end
File._bytecodeKind = bytecodeKind

-- Functions are bytecode. Memory files (torch.serialize / deserialize, clone) load the bytecode
-- this runtime writes, as torch7 does; files from disk refuse functions (loading runs code from
-- the file) unless functions = 'load' (trusted files only: bytecode is not verified);
-- functions = 'skip' reads them as nil. Bytecode of other Lua versions cannot load here.
local function readFunction(self, st, index, code)
  local mode = self._options.functions or self._functions
  local bytecode = readRawString(self, 'function bytecode size')
  local kind, loadable = bytecodeKind(bytecode)
  if mode == 'error' then
    error(("is a Lua function (%s): functions in files are not loaded, since that would run code from " ..
           "the file; read it as nil with the option functions = 'skip'%s, or re-save the object without " ..
           "functions"):format(kind, loadable and ", load it from a trusted file with functions = 'load'" or ''), 0)
  end
  if mode == 'skip' then
    if index then st.objects[index] = SKIPPED end
    readValue(self, st)    -- the upvalues (read for the references they hold)
    return nil
  end
  if not loadable then
    error(("is a Lua function in %s, which this runtime (%s) cannot load: read it as nil with the " ..
           "option functions = 'skip', or re-save the object without functions"):format(kind, jit.version), 0)
  end
  local fn, err = loadstring(bytecode)
  if not fn then error('cannot load a function: ' .. tostring(err), 0) end
  if index then st.objects[index] = fn end
  local upvalues = readValue(self, st)
  if type(upvalues) ~= 'table' then error('function upvalues are not a table', 0) end
  st.upvalueIds = st.upvalueIds or {}
  for i, up in ipairs(upvalues) do
    if code ~= TYPE_RECUR_FUNCTION then
      debug.setupvalue(fn, i, up)
    elseif type(up) == 'table' then
      debug.setupvalue(fn, i, up.value)
      local shared = up.id ~= nil and st.upvalueIds[up.id]
      if shared then debug.upvaluejoin(fn, i, shared[1], shared[2])
      elseif up.id ~= nil then st.upvalueIds[up.id] = { fn, i } end
    end
  end
  return fn
end

-- The kind of object a type code stands for (a reference's code must be its object's).
local KIND = { [TYPE_TABLE] = TYPE_TABLE, [TYPE_TORCH] = TYPE_TORCH,
               [types.LEGACY_RECUR_FUNCTION] = TYPE_RECUR_FUNCTION, [TYPE_RECUR_FUNCTION] = TYPE_RECUR_FUNCTION }

-- Tables, torch objects and functions: a reference to one read before, or a new one.
local function readContainer(self, st, code)
  if code == TYPE_FUNCTION then return readFunction(self, st, nil, code) end
  local index = self:readInt()
  if self._force then
    index = nil
  else
    local known = st.objects[index]
    if known ~= nil then
      if st.kinds[index] ~= KIND[code] then
        error(('bad reference %d: type code %d, but that object has type code %d'):format(index, code, st.kinds[index]), 0)
      end
      if known == SKIPPED then return nil end
      return known
    end
    if index ~= st.n + 1 then
      error(('bad reference %d: no object with that index has been read (next new object: %d)'):format(index, st.n + 1), 0)
    end
    st.n, st.kinds[index] = index, KIND[code]
  end
  if code == TYPE_TABLE then return readTable(self, st, index) end
  if code == TYPE_TORCH then return readTorch(self, st, index) end
  return readFunction(self, st, index, code)
end

function readValue(self, st)
  local code = self:readInt()
  if code == TYPE_NIL then return nil end
  if code == TYPE_NUMBER then return self:readDouble() end
  if code == TYPE_BOOLEAN then return self:readInt() == 1 end
  if code == TYPE_STRING then return readRawString(self, 'string length') end
  if code < TYPE_TABLE or code > TYPE_RECUR_FUNCTION then error(('unknown object type code %d'):format(code), 0) end
  local level = st.level + 1
  if level > File.maxDepth then error(('objects nested deeper than %d levels'):format(File.maxDepth), 0) end
  st.level = level
  local result
  if level % SPLIT == 0 then
    result = onFreshStack(readContainer, self, st, code)
  else
    result = readContainer(self, st, code)
  end
  st.level = level - 1
  return result
end

-- What a file that is not a .t7 looks like, from its first bytes: nil when it starts as a .t7
-- file in this encoding does (or looks like nothing known). The rules of luabridge.t7.format.
local HEAD_BYTES = format.headBytes
local function looksLike(head, binary)
  if #head == 0 then return 'an empty file' end
  local digit = head:match('^%s*(%d)%s')
  local asciiStart = digit ~= nil and tonumber(digit) <= LAST_TYPE
  local b1, b2, b3, b4 = head:byte(1, 4)
  local binaryStart = b4 ~= nil and b1 <= LAST_TYPE and b2 == 0 and b3 == 0 and b4 == 0
  if (binary and binaryStart) or (not binary and asciiStart) then return nil end
  for _, known in ipairs(format.notT7) do
    if head:sub(1, #known[1]) == known[1] then return known[2] end
  end
  if binary and asciiStart then return 'an ascii .t7 file (read it in the ascii format)' end
  if not binary and binaryStart then return 'a binary .t7 file (read it in the binary format)' end
  if not head:find('[%z\1-\8\14-\31\127]') then
    return ('text (it begins "%s")'):format((head:match('^[^\n]*'):sub(1, 40):gsub('[\128-\255]', '?')))
  end
end

local function notT7(self, start)
  local ok, head = pcall(function()
    self:seek(start)
    return self:_readBytes(math.min(HEAD_BYTES, self:_left()))
  end)
  return ok and looksLike(head, self._binary) or nil
end

-- readObject(): the next object; objects seen before come back as the same Lua value.
function File:readObject()
  checkOpen(self, true)
  local st = readState(self)
  if st.active then return readValue(self, st) end
  st.active = true
  local start = not st.started and self:position()   -- the first object: where the file starts
  st.started = true
  local ok, res = pcall(readValue, self, st)
  st.active = false
  if not ok then
    if __luabridge_interrupt(res) then st.path, st.depth, st.level = {}, 0, 0; error(res, 0) end
    local msg = located(self, st, res)   -- (before notT7 moves the position)
    local looks = start and notT7(self, start)
    if looks then msg = ('%s: not a .t7 file: it looks like %s'):format(self._op or 'readObject', looks) end
    st.path, st.depth, st.level = {}, 0, 0
    check.error(msg)
  end
  return res
end

return File
