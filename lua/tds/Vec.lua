-- tds.Vec([tbl | ...]): a vector of tds elements indexed from 1, which may hold nil; d[i],
-- d[i] = v (past the end grows it), #d (its size, nils included), ipairs/pairs(d), and
-- insert, remove, resize, sort, concat, concatstorage.
local tdsObject = require 'tds.object'
local File = require 'torch.File'

local contents = tdsObject.contents
local checkElement = tdsObject.checkElement

local Vec = {}
local methods = {}

function Vec.__empty() return { items = {}, n = 0 } end

local function checkIndex(i, op, level)
  if type(i) ~= 'number' or i < 1 or i % 1 ~= 0 then
    error(('tds.Vec%s: index must be a positive integer, got %s'):format(op, tostring(i)), level + 1)
  end
end

function Vec.__index(self, key)
  if type(key) == 'number' then
    checkIndex(key, '', 2)
    return contents[self].items[key]
  end
  local m = methods[key]
  if m == nil then error(('tds.Vec: invalid key <%s> (an index or a method name)'):format(tostring(key)), 2) end
  return m
end

local function set(self, i, value, op, level)
  checkIndex(i, op, level + 1)
  if value ~= nil then checkElement(value, 'tds.Vec' .. op, 'value') end
  local c = contents[self]
  c.items[i] = value
  if i > c.n then c.n = i end
end

function Vec.__newindex(self, i, value) set(self, i, value, '', 2) end

function Vec.__len(self) return contents[self].n end

local function step(self, i)
  i = i + 1
  local c = contents[self]
  if i <= c.n then return i, c.items[i] end
end
function Vec.__ipairs(self) return step, self, 0 end
Vec.__pairs = Vec.__ipairs

-- insert([index,] value): value at index (default: after the last), the elements from index on
-- moved up one.
function methods.insert(self, ...)
  local nargs = select('#', ...)
  local c = contents[self]
  local index, value
  if nargs == 1 then index, value = c.n + 1, ...
  elseif nargs == 2 then index, value = ...
  else error('tds.Vec:insert: [index,] value expected', 2) end
  checkIndex(index, ':insert', 2)
  if value ~= nil then checkElement(value, 'tds.Vec:insert', 'value') end
  local items = c.items
  for i = c.n, index, -1 do items[i + 1] = items[i] end
  items[index] = value
  c.n = math.max(c.n + 1, index)
end

-- remove([index]): drops the element at index (default: the last), moving the rest down.
function methods.remove(self, index)
  local c = contents[self]
  index = index or c.n
  checkIndex(index, ':remove', 2)
  if index > c.n then error(('tds.Vec:remove: index %d out of range (size %d)'):format(index, c.n), 2) end
  local items = c.items
  for i = index, c.n - 1 do items[i] = items[i + 1] end
  items[c.n] = nil
  c.n = c.n - 1
end

function methods.resize(self, size)
  if type(size) ~= 'number' or size < 0 or size % 1 ~= 0 then
    error(('tds.Vec:resize: size must be a non-negative integer, got %s'):format(tostring(size)), 2)
  end
  local c = contents[self]
  for i = size + 1, c.n do c.items[i] = nil end
  c.n = size
end

-- sort([compare]): in place; compare(a, b) is true when a goes first (default a < b); nil
-- elements are passed to compare as nil.
local NIL = {}
function methods.sort(self, compare)
  compare = compare or function(a, b) return a < b end
  if type(compare) ~= 'function' then error('tds.Vec:sort: compare must be a function', 2) end
  local c = contents[self]
  local dense = {}
  for i = 1, c.n do
    local v = c.items[i]
    if v == nil then v = NIL end
    dense[i] = v
  end
  table.sort(dense, function(a, b)
    if a == NIL then a = nil end
    if b == NIL then b = nil end
    return compare(a, b)
  end)
  for i = 1, c.n do
    local v = dense[i]
    if v == NIL then v = nil end
    c.items[i] = v
  end
end

-- concat([sep[, i[, j]]]): tostring of elements i..j (default the whole vector), joined by sep.
function methods.concat(self, sep, i, j)
  local c = contents[self]
  i, j = i or 1, j or c.n
  local parts = {}
  for k = i, j do parts[#parts + 1] = tostring(c.items[k]) end
  return table.concat(parts, sep or '')
end

function methods.concatstorage(self, sep, i, j)
  return torch.CharStorage():string(methods.concat(self, sep, i, j))
end

function Vec.__write(self, file)
  local c = contents[self]
  file:writeLong(c.n)
  for i = 1, c.n do file:writeObject(c.items[i]) end
end

function Vec.__read(self, file)
  local n = File._readCount(file, 'tds.Vec size', File._minBytes(file, File._kinds.Int), file.readLong)
  methods.resize(self, n)
  for i = 1, n do self[i] = file:readObject() end
end

-- tds.Vec[2]{ ... }, at most 20 elements shown.
function Vec.__tostring(self)
  local c = contents[self]
  local lines = { ('tds.Vec[%d]{'):format(c.n) }
  for i = 1, math.min(c.n, 20) do
    tdsObject.entryLines(lines, ('%5d : '):format(i), c.items[i])
  end
  if c.n > 20 then lines[#lines + 1] = '...' end
  lines[#lines + 1] = '}'
  return table.concat(lines, '\n')
end

local function new(self, ...)
  local tbl = ...
  if not (select('#', ...) == 1 and type(tbl) == 'table' and torch.typename(tbl) == nil) then
    tbl = { ... }
  end
  for k, v in pairs(tbl) do
    if type(k) ~= 'number' then error('tds.Vec: a Lua table with number keys expected', 3) end
    if type(v) == 'table' and torch.typename(v) == nil then v = tdsObject.fromTable(v) end
    set(self, k, v, '', 3)
  end
  return self
end

local _, ctor = tdsObject.class('tds.Vec', Vec, new)
return ctor
