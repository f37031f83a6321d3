-- class: torch's standalone object classes (torch/class), apart from torch.class: its own
-- registry, never touching the global namespace.
--   local A = class('A'); function A:__init(x) self.x = x end; local a = A(1) (or A.new(1))
--   local B = class('B', 'A')  -- B inherits A's methods; class.istype(B(), 'A') is true
local class = {}
local classes = {}     -- name -> metatable
local descendants = {} -- name -> set of the names of it and its subclasses
local ctypes = {}      -- ffi ctype id -> class name

-- The constructor table: reads and writes go to the metatable, calling it makes an instance,
-- getmetatable gives the metatable.
local function constructor(mt)
  return setmetatable({}, {
    __index = mt, __newindex = mt, __metatable = mt,
    __call = function(_, ...) return mt.new(...) end,
  })
end

-- class.new(name[, parentname][, ctype]): a new class (ctype: an FFI ctype whose cdata count
-- as instances); returns its constructor table, and the parent's metatable when there is one.
function class.new(name, parentname, ctype)
  if type(parentname) == 'cdata' and ctype == nil then parentname, ctype = nil, parentname end
  if type(name) ~= 'string' then error('class.new: class name (a string) expected', 2) end
  if parentname ~= nil and type(parentname) ~= 'string' then
    error('class.new: parent class name must be a string', 2)
  end
  if classes[name] then error(('class <%s> already exists'):format(name), 2) end
  local parent = parentname and classes[parentname]
  if parentname and not parent then error(('parent class <%s> does not exist'):format(parentname), 2) end
  if ctype ~= nil then
    local id = tonumber(ctype)
    if not id then error('class.new: invalid ffi ctype', 2) end
    if ctypes[id] then error(('ctype <%s> already considered as <%s>'):format(tostring(ctype), ctypes[id]), 2) end
    ctypes[id] = name
  end

  local mt = { __typename = name }
  mt.__index = mt
  mt.__factory = function() return setmetatable({}, mt) end
  mt.__init = function() end
  mt.new = function(...)
    local self = mt.__factory()
    self:__init(...)
    return self
  end
  classes[name] = mt
  descendants[name] = { [name] = true }
  if parent then
    setmetatable(mt, parent)
    local p = parent
    while p do
      descendants[p.__typename][name] = true
      p = getmetatable(p)
    end
    return constructor(mt), parent
  end
  return constructor(mt)
end

-- class.factory(name): an instance of name without calling __init.
function class.factory(name)
  local mt = classes[name]
  if not mt then error(('unknown class <%s>'):format(tostring(name)), 2) end
  return mt.__factory()
end

function class.metatable(name) return classes[name] end

-- The class name of obj: its metatable's __typename (tables, userdata) or its registered ctype
-- (cdata); nil when it has none.
local function className(obj)
  local t = type(obj)
  if t == 'table' or t == 'userdata' then
    local mt = getmetatable(obj)
    return type(mt) == 'table' and rawget(mt, '__typename') or nil
  elseif t == 'cdata' then
    return ctypes[tonumber(require('ffi').typeof(obj))]
  end
end

-- class.type(obj): its class name, else type(obj).
function class.type(obj)
  return className(obj) or type(obj)
end

-- class.istype(obj, name): obj is an instance of name or of a subclass (names of other type
-- systems, such as torch's, compare as they are; objects of no class compare type(obj)).
function class.istype(obj, name)
  local own = className(obj)
  if not own then return type(obj) == name end
  local valid = descendants[name]
  if valid then return valid[own] or false end
  return own == name
end

return setmetatable(class, { __call = function(self, ...) return self.new(...) end })
