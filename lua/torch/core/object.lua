-- Tensors and storages are userdata, as in torch7: legacy code tells a tensor from a table of
-- tensors by type(x), and a LuaJIT without LUA52COMPAT (the stock lupa's) honours __len
-- (#t, #t:size()) on userdata only.
-- Their fields live in a weak-keyed side table.
local object = {}
local fields = setmetatable({}, { __mode = 'k' })
object.fields = fields

-- The metatable of a new userdata class, holding the entries of init.
function object.metatable(init)
  local proto = newproxy(true)
  local mt = getmetatable(proto)
  for k, v in pairs(init) do mt[k] = v end
  mt.__proto = proto
  return mt
end

-- A new object of class mt with the given fields table.
function object.new(mt, f)
  local u = newproxy(mt.__proto)
  fields[u] = f
  return u
end

-- __index: the object's fields, then the class entries, then other(obj, key) (element access).
function object.indexer(mt, other)
  return function(o, k)
    local v = fields[o][k]
    if v ~= nil then return v end
    v = mt[k]
    if v ~= nil or other == nil then return v end
    return other(o, k)
  end
end

-- __newindex: string keys set fields; any other key goes to element(obj, key, value).
function object.setter(element)
  return function(o, k, v)
    if type(k) == 'string' then fields[o][k] = v else element(o, k, v) end
  end
end

return object
