-- pairs and ipairs that honour __pairs / __ipairs metamethods, as Lua 5.2 and torch7's LuaJIT
-- (built with LUAJIT_ENABLE_LUA52COMPAT) do: `for k, v in pairs(hash)` over a tds container.
-- luabridge's LuaJIT has that option (luabridge.lua52); on the stock lupa's, which lacks it,
-- require 'tds' installs these (once: a module); on anything else they return what the
-- built-in ones return.
local rawPairs, rawIpairs = pairs, ipairs
local honoured = rawPairs(setmetatable({}, { __pairs = function() return 'honoured' end })) == 'honoured'
if honoured then return end

local function metamethod(obj, name)
  local mt = getmetatable(obj)
  return type(mt) == 'table' and rawget(mt, name) or nil
end

local function pairs52(obj)
  local f = metamethod(obj, '__pairs')
  if f then return f(obj) end
  return rawPairs(obj)
end

local function ipairs52(obj)
  local f = metamethod(obj, '__ipairs')
  if f then return f(obj) end
  return rawIpairs(obj)
end

_G.pairs, _G.ipairs = pairs52, ipairs52
