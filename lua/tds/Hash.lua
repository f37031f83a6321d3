-- tds.Hash([tbl]): a hash table of tds elements; d[k], d[k] = v (nil removes), #d (the number
-- of pairs), pairs(d). Nested tables in tbl become tds.Vec / tds.Hash.
local tdsObject = require 'tds.object'
local File = require 'torch.File'

local contents = tdsObject.contents
local checkElement = tdsObject.checkElement

local Hash = {}

function Hash.__empty() return { map = {}, n = 0 } end

function Hash.__index(self, key)
  if key == nil then error('tds.Hash: index is nil', 2) end
  return contents[self].map[key]
end

function Hash.__newindex(self, key, value)
  if key == nil then error('tds.Hash: index is nil', 2) end
  checkElement(key, 'tds.Hash', 'key')
  local c = contents[self]
  local old = c.map[key]
  if value ~= nil then checkElement(value, 'tds.Hash', 'value') end
  if old == nil and value ~= nil then c.n = c.n + 1 elseif old ~= nil and value == nil then c.n = c.n - 1 end
  c.map[key] = value
end

function Hash.__len(self) return contents[self].n end

function Hash.__pairs(self) return next, contents[self].map, nil end

-- Keys in a fixed order (numbers, then strings, then booleans, then the rest), so that one hash
-- saves to the same bytes in every process.
local rank = { number = 1, string = 2, boolean = 3 }
local function before(a, b)
  local ra, rb = rank[type(a)] or 4, rank[type(b)] or 4
  if ra ~= rb then return ra < rb end
  if ra == 3 then return b and not a end
  if ra == 4 then return false end
  return a < b
end
local function sortedKeys(self)
  local keys = {}
  for k in next, contents[self].map do keys[#keys + 1] = k end
  table.sort(keys, before)
  return keys
end

function Hash.__write(self, file)
  local map = contents[self].map
  local keys = sortedKeys(self)
  file:writeLong(#keys)
  for _, k in ipairs(keys) do
    file:writeObject(k)
    file:writeObject(map[k])
  end
end

function Hash.__read(self, file)
  local n = File._readCount(file, 'tds.Hash size', 2 * File._minBytes(file, File._kinds.Int), file.readLong)
  for _ = 1, n do
    local k = file:readObject()
    if k == nil or k ~= k then error('tds.Hash key is nil or nan', 0) end
    self[k] = file:readObject()
  end
end

-- tds.Hash[3]{ ... }, keys aligned, at most 20 entries shown.
function Hash.__tostring(self)
  local keys = sortedKeys(self)
  local map = contents[self].map
  local function keyText(k)
    local t = type(k)
    return (t == 'string' or t == 'number' or t == 'boolean') and tostring(k) or torch.type(k)
  end
  local width = 0
  for i = 1, math.min(#keys, 20) do width = math.max(width, #keyText(keys[i])) end
  local lines = { ('tds.Hash[%d]{'):format(#keys) }
  for i = 1, math.min(#keys, 20) do
    local kt = keyText(keys[i])
    tdsObject.entryLines(lines, kt .. string.rep(' ', width - #kt) .. ' : ', map[keys[i]])
  end
  if #keys > 20 then lines[#lines + 1] = '...' end
  lines[#lines + 1] = '}'
  return table.concat(lines, '\n')
end

local function new(self, ...)
  local n = select('#', ...)
  local tbl = ...
  if n == 1 and type(tbl) == 'table' and torch.typename(tbl) == nil then
    for k, v in pairs(tbl) do
      if type(k) == 'table' then k = tdsObject.fromTable(k) end
      if type(v) == 'table' and torch.typename(v) == nil then v = tdsObject.fromTable(v) end
      self[k] = v
    end
  elseif n > 0 then
    error('tds.Hash: a Lua table or nothing expected', 3)
  end
  return self
end

local _, ctor = tdsObject.class('tds.Hash', Hash, new)
return ctor
