-- What tds.Hash, tds.Vec and tds.AtomicCounter share: each is a torch class whose instances
-- are userdata (so `#d`, `d[k]` and torch.type work as on torch7's FFI cdata), holding their
-- contents in a weak-keyed side table; values they can hold; tables turned into tds objects.
require 'torch'
local object = require 'torch.core.object'

local tdsObject = {}
tdsObject.contents = object.fields

-- A new class: its metatable (entries of methods) registered with torch under name, and its
-- constructor table, called as ctor(...) -> new(...). __factory makes the empty instance that
-- torch.load fills through __read.
function tdsObject.class(name, methods, new)
  local mt = object.metatable(methods)
  mt.__typename = name
  mt.__version = 0   -- torch7's tds writes "V 0"
  local function empty() return object.new(mt, mt.__empty()) end
  mt.__factory = empty
  torch._registermetatable(name, mt)
  local ctor = setmetatable({}, {
    __index = mt,
    __call = function(_, ...) return new(empty(), ...) end,
    __tostring = function() return 'tds class ' .. name end,
  })
  return mt, ctor
end

-- Keys and values a tds container holds: numbers, strings, booleans, tensors, storages and tds
-- objects (as torch7's tds, which stores C types only); never nil keys or NaN.
function tdsObject.checkElement(value, op, what)
  local t = type(value)
  if t == 'number' or t == 'string' or t == 'boolean' then
    if value ~= value then error(('%s: %s is NaN'):format(op, what), 3) end
    return
  end
  local name = torch.typename(value)
  if name and (name:match('^tds%.') or torch.isTensor(value) or torch.isStorage(value)) then return end
  error(('%s: unsupported %s type <%s> (numbers, strings, booleans, tensors, storages and tds objects)')
    :format(op, what, name or t), 3)
end

-- A Lua table as a tds object: tds.Vec when all its keys are numbers, else tds.Hash.
function tdsObject.fromTable(tbl)
  local tds = require 'tds'
  for k in pairs(tbl) do
    if type(k) ~= 'number' then return tds.Hash(tbl) end
  end
  return tds.Vec(tbl)
end

-- "<indent>key : value" lines, a multi-line value indented under its first line.
function tdsObject.entryLines(lines, keyText, value)
  local text = torch.type(value) == 'string' and value or tostring(value)
  local pad = string.rep(' ', #keyText)
  local first = true
  for line in (text .. '\n'):gmatch('([^\n]*)\n') do
    lines[#lines + 1] = first and keyText .. line or line == '' and '' or pad .. line
    first = false
  end
end

return tdsObject
