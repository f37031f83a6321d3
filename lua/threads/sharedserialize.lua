-- threads.sharedserialize: as threads.serialize, but tensors, storages and tds objects are not
-- copied: load gives back the very objects saved (torch7 shares their memory between threads;
-- one Lua state shares the objects themselves). The saved objects live as long as the storage
-- save returned.
require 'torch'
local serialize = require 'threads.serialize'

local shared = {}
local held = setmetatable({}, { __mode = 'k' })   -- storage -> the objects it refers to
local PLACEHOLDER = '__threads_shared'

local function isShared(obj)
  local name = torch.typename(obj)
  return name ~= nil and (torch.isTensor(obj) or torch.isStorage(obj) or name:match('^tds%.') ~= nil)
end

function shared.save(obj)
  local objects, ids = {}, {}
  local f = torch.MemoryFile()
  f:binary()
  f:writeObject(obj, nil, function(o)
    if not isShared(o) then return o end
    if not ids[o] then objects[#objects + 1] = o; ids[o] = #objects end
    return { [PLACEHOLDER] = ids[o] }
  end)
  local storage = f:storage()
  f:close()
  held[storage] = objects
  return storage
end

-- Puts the saved objects back in place of their placeholders, in tables (keys and values) and
-- in Lua functions' upvalues.
local function restore(value, objects, seen)
  if type(value) == 'table' then
    local id = rawget(value, PLACEHOLDER)
    if id and next(value, next(value)) == nil then return objects[id] end
    if seen[value] then return value end
    seen[value] = true
    local entries = {}
    for k, v in pairs(value) do entries[#entries + 1] = { k, v } end
    for _, kv in ipairs(entries) do
      local k, v = restore(kv[1], objects, seen), restore(kv[2], objects, seen)
      if k ~= kv[1] then rawset(value, kv[1], nil) end
      rawset(value, k, v)
    end
  elseif type(value) == 'function' and not seen[value] then
    seen[value] = true
    for i = 1, math.huge do
      local name, v = debug.getupvalue(value, i)
      if not name then break end
      local r = restore(v, objects, seen)
      if r ~= v then debug.setupvalue(value, i, r) end
    end
  end
  return value
end

function shared.load(storage)
  local objects = held[storage]
  if not objects then error('threads.sharedserialize.load: storage not made by this save', 2) end
  return restore(serialize.load(storage), objects, {})
end

return shared
