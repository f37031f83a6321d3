-- torch7's class system: named metatables, constructors, inheritance, typename queries.
local torch = require 'torch.env'

local metatables = {}   -- name -> metatable
local parents = {}      -- metatable -> parent metatable

-- Metamethods forward to the torch7-style hooks (__call__, __add__, ...), looked up in the
-- instance's metatable and its parents as luaT's operators did (lua_getfield on the metatable),
-- not through the instance: a class whose metatable has its own __index (deepmind/classic's
-- torch.Object) still finds them. A subclass can define them after the class is made. Without a
-- hook, luaT's messages ("torch.X has no call operator"); == falls back to raw equality.
local function hookOf(x, hook)
  local tx = type(x)
  if tx ~= 'table' and tx ~= 'userdata' then return nil end
  local mt = debug.getmetatable(x)
  return mt and mt[hook]
end
local function forward(hook, what)
  return function(self, ...)
    local f = hookOf(self, hook)
    if f == nil then error(torch.typename(self) .. ' has no ' .. what .. ' operator', 2) end
    return f(self, ...)
  end
end
local function binary(hook, what)
  return function(a, b)
    local f = hookOf(a, hook)
    if f == nil then f = hookOf(b, hook) end
    if f == nil then
      error(torch.typename(type(a) == 'table' and a or b) .. ' has no ' .. what .. ' operator', 2)
    end
    return f(a, b)
  end
end
-- one function for every class, as luaT's: Lua asks __eq only when both sides share it
local function equal(a, b)
  local f = hookOf(a, '__eq__')
  if f ~= nil then return f(a, b) end
  return rawequal(a, b)
end
local operators = {
  __unm = forward('__unm__', 'negation'), __call = forward('__call__', 'call'),
  __add = binary('__add__', 'addition'), __sub = binary('__sub__', 'substraction'),
  __mul = binary('__mul__', 'multiplication'), __div = binary('__div__', 'division'),
  __mod = binary('__mod__', 'modulo'), __pow = binary('__pow__', 'power'),
  __concat = binary('__concat__', 'concat'), __lt = binary('__lt__', 'lower than'),
  __le = binary('__le__', 'lower or equal than'), __eq = equal,
}

local function setpath(name, value)
  local t = _G
  local parts = {}
  for p in name:gmatch('[^%.]+') do parts[#parts + 1] = p end
  for i = 1, #parts - 1 do
    local nxt = rawget(t, parts[i])
    if nxt == nil then nxt = {}; rawset(t, parts[i], nxt) end
    t = nxt
  end
  rawset(t, parts[#parts], value)
end

-- Makes (or returns) the metatable of a class. `ctor` builds an instance when the class is called.
function torch.newmetatable(name, parentName, ctor)
  local mt = {}
  mt.__index = mt
  mt.__typename = name
  mt.__tostring = function(self)
    local f = self.__tostring__
    if f then return f(self) end
    return name
  end
  for k, f in pairs(operators) do mt[k] = f end
  -- # of an instance (LUA52COMPAT calls __len on tables): its __len__, else an error, as luaT's
  -- default __len (a class such as nn.Sequential sets its own __len instead)
  mt.__len = function(self)
    local f = self.__len__
    if f == nil then error(name .. ' has no length operator', 2) end
    return f(self)
  end
  local parent
  if parentName then
    parent = metatables[parentName]
    if not parent then error('parent class ' .. parentName .. ' does not exist', 3) end
    parents[mt] = parent
    -- as luaT's: getmetatable(mt) is the parent's metatable (torch-autograd's nnwrapper tells
    -- nn modules from criteria by getmetatable(getmetatable(nn.X)).__typename)
    setmetatable(mt, { __index = parent, __metatable = parent })
  end
  metatables[name] = mt
  -- getmetatable(Class) is the class metatable, as luaT's constructor metatable redirects it
  -- (`__metatable`); debug.getmetatable gives the constructor's own
  local constructor = setmetatable({}, {
    __index = mt,
    __newindex = mt,
    __call = function(_, ...) return ctor(mt, ...) end,
    __tostring = function() return 'torch.' .. 'class ' .. name end,
    __metatable = mt,
  })
  mt.__constructor = constructor
  -- luaT puts the constructor in the metatable as `new` too: Class.new(...) is Class(...)
  mt.new = function(...) return ctor(mt, ...) end
  -- luaT keeps class metatables in the Lua registry (registry[mt] = name), and code tells classes
  -- from plain tables that way (torchnet's torch.isclass(getmetatable(x))); the constructor's own
  -- metatable is registered as well
  local registry = debug.getregistry()
  registry[mt], registry[debug.getmetatable(constructor)] = name, name
  setpath(name, constructor)
  return mt, parent
end

-- "3, nil, torch.DoubleTensor": constructor arguments as an error message shows them.
local function argList(...)
  local parts = {}
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    parts[i] = type(v) == 'number' and tostring(v) or type(v) == 'string' and ('%q'):format(v) or torch.type(v)
  end
  return table.concat(parts, ', ')
end

local function construct(mt, ...)
  local self = setmetatable({}, mt)
  local init = self.__init
  if init then
    local ok, err = pcall(init, self, ...)
    if not ok then
      -- a runtime error inside __init ("attempt to perform arithmetic on a nil value") names
      -- neither the class nor what it was given: say both
      local name = mt.__typename
      if type(err) == 'string' and not err:find(name, 1, true) then
        err = ('%s(%s): invalid arguments: %s'):format(name, argList(...), (err:gsub('^[^\n:]+:%d+: ', '')))
        require('torch.core.check').error(err)
      end
      error(err, 0)
    end
  end
  return self
end

-- torch.class(name[, parentName][, module]): a new class; returns its metatable and the parent's.
function torch.class(name, parentName, module)
  if type(name) ~= 'string' then error('torch.class: class name must be a string', 2) end
  if metatables[name] then error('class ' .. name .. ' has been already assigned', 2) end
  if type(parentName) == 'table' and module == nil then module, parentName = parentName, nil end
  local mt, parent = torch.newmetatable(name, parentName, construct)
  if module then
    local short = name:match('([^%.]+)$')
    rawset(module, short, mt.__constructor)
  end
  return mt, parent
end

function torch.getmetatable(name)
  if type(name) ~= 'string' then error('torch.getmetatable: string expected', 2) end
  return metatables[name]
end

-- Registers an existing metatable under a name (the tensor and storage types use this).
function torch._registermetatable(name, mt, parent)
  metatables[name] = mt
  if parent then parents[mt] = parent end
end

function torch.typename(obj)
  local mt = debug.getmetatable(obj)  -- the real one, as luaT_typename's lua_getmetatable: a class's constructor has none
  if type(mt) == 'table' then
    local n = rawget(mt, '__typename')
    if n then return n end
  end
  return nil
end

function torch.type(obj)
  return torch.typename(obj) or type(obj)
end

function torch.parentOf(mt) return parents[mt] end

-- Makes `standin` (a metatable another module sets on an instance of class mt for a while: nn's
-- whole-model plans, lua/nn/util/plans.lua) answer torch.isTypeOf as mt does: its parents are mt's.
function torch._standin(standin, mt)
  assert(rawget(standin, '__typename') == rawget(mt, '__typename'), 'torch._standin: another class')
  parents[standin] = parents[mt]
  return standin
end

-- True when obj's class is typeSpec or derives from it (typeSpec: a name, a Lua pattern on
-- names as in torch7, or a constructor).
function torch.isTypeOf(obj, typeSpec)
  local mt = debug.getmetatable(obj)
  if type(mt) ~= 'table' then return false end
  local wanted
  if type(typeSpec) == 'table' then
    local tmt = getmetatable(typeSpec)
    wanted = tmt and tmt.__index and rawget(tmt.__index, '__typename') or rawget(typeSpec, '__typename')
  else
    wanted = typeSpec
  end
  if type(wanted) ~= 'string' then error('torch.isTypeOf: type must be a string or a class', 2) end
  while mt do
    local n = rawget(mt, '__typename')
    local match = n and n:match(wanted)
    -- a plain name must match whole; a pattern may match a part ('.*Long')
    if match and (match ~= wanted or match == n) then return true end
    mt = parents[mt]
  end
  return false
end

-- A function making an instance of a class without calling __init (used by deserialisation).
function torch.factory(name)
  local mt = metatables[name]
  if not mt then return nil end
  local make = rawget(mt, '__factory')
  if make then return make end
  return function() return setmetatable({}, mt) end
end

function torch.setmetatable(obj, name)
  local mt = metatables[name]
  if not mt then error('torch.setmetatable: unknown class ' .. tostring(name), 2) end
  return setmetatable(obj, mt)
end

-- A number identifying an object, as luaT_lua_pointer: a tensor's own identity (torch7 gives its
-- THTensor's address: the same after :set() or :resize(), distinct for two views of one storage;
-- optnet keys tensors by it), a storage's data address, a table's or cdata's address.
function torch.pointer(obj)
  if torch.isStorage(obj) and obj._ptr then return tonumber(require('ffi').cast('intptr_t', obj._ptr)) end
  if type(obj) == 'userdata' then
    local ffi = require('ffi')
    return tonumber(ffi.cast('intptr_t', ffi.cast('void *', obj)))
  end
  if type(obj) == 'cdata' then return tonumber(require('ffi').cast('intptr_t', obj)) end
  local t = type(obj)
  if t == 'table' or t == 'function' or t == 'thread' then
    -- the address, whatever __tostring says (and a class's metatable is protected)
    local s = string.format('%p', obj):match('0x(%x+)')
    return s and tonumber(s, 16) or nil
  end
  return nil
end

return torch
