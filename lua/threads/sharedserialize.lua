-- threads.sharedserialize: as threads.serialize, but CPU storages (so tensors' data too) and
-- tds.AtomicCounters are shared, not copied. save writes an index in place of each and lists
-- them (sharedOf(storage)); load(storage[, shared]) puts the listed ones back. Between two
-- runtimes luabridge/threads.py hands each listed storage's numpy buffer to the other, which
-- makes a storage over the same memory: a write on one side is seen on the other, and the
-- buffer lives while any runtime holds it. (torch7's writes pointers and retains them.)
-- saveListing / loadListing are the mechanism, which threads/transfer.lua also uses to move big
-- storages of threads.serialize's jobs as fresh copies rather than as bytes.
require 'torch'
local serialize = require 'threads.serialize'
pcall(require, 'tds')   -- as torch7's: a runtime reading a shared counter knows the class

local shared = {}
local listed = setmetatable({}, { __mode = 'k' })   -- saved storage -> the objects it shares

local function identity(x) return x end

-- The metatables of what may be listed, each with how to get its storage and to rebuild it.
local function listableKinds()
  local kinds = {}
  for _, mt in pairs(torch._storageMetatables) do
    if not rawget(mt, '__alloc') then kinds[mt] = { storageOf = identity, fromStorage = identity, storage = true } end
  end
  local counter = torch.getmetatable('tds.AtomicCounter')
  if counter then kinds[counter] = { storageOf = counter.__sharedStorage, fromStorage = counter.__fromSharedStorage } end
  return kinds
end

local SWAPPED = { '__write', '__read', '__factory' }

-- Runs fn(arg) with the serialization hooks of each metatable in hooks replaced (as torch7
-- swaps them), putting the originals back however fn ends.
local function withHooks(hooks, fn, arg)
  local saved = {}
  for mt, replacement in pairs(hooks) do
    saved[mt] = {}
    for _, k in ipairs(SWAPPED) do
      saved[mt][k] = rawget(mt, k)
      if replacement[k] then rawset(mt, k, replacement[k]) end
    end
  end
  local ok, result = pcall(fn, arg)
  for mt, fields in pairs(saved) do
    for _, k in ipairs(SWAPPED) do rawset(mt, k, fields[k]) end
  end
  if not ok then error(result, 0) end
  return result
end

-- save(obj) with each listable object o for which pick(kind, o) gives a storage listed (an
-- index written in its place) and the others written as usual (after a 0). Returns the saved
-- CharStorage and the list.
function shared.saveListing(obj, pick)
  local list, hooks = {}, {}
  for mt, kind in pairs(listableKinds()) do
    local write = mt.__write or mt.write
    hooks[mt] = { __write = function(o, f)
      local s = pick(kind, o)
      if s == nil then
        f:writeInt(0)
        return write(o, f)
      end
      list[#list + 1] = s
      f:writeInt(#list)
    end }
  end
  return withHooks(hooks, serialize.save, obj), list
end

-- load of what saveListing saved, list holding the listed storages (as this runtime's).
function shared.loadListing(storage, list)
  local hooks, inline = {}, setmetatable({}, { __mode = 'k' })   -- objects read as usual
  for mt, kind in pairs(listableKinds()) do
    local factory, read = rawget(mt, '__factory'), mt.__read or mt.read
    hooks[mt] = {
      __factory = function(f)
        local index = f:readInt()
        if index == 0 then
          local o = factory(f)
          inline[o] = true
          return o
        end
        local s = list[index]
        if s == nil then error(('threads.sharedserialize.load: no shared object %d'):format(index), 0) end
        return kind.fromStorage(s)
      end,
      __read = function(o, f, version)
        if inline[o] then
          inline[o] = nil
          return read(o, f, version)
        end
      end,
    }
  end
  return withHooks(hooks, serialize.load, storage)
end

local function everything(kind, o) return kind.storageOf(o) end

function shared.save(obj)
  local storage, list = shared.saveListing(obj, everything)
  listed[storage] = list
  return storage
end

-- The storages a saved object shares, in the order load wants them.
function shared.sharedOf(storage) return listed[storage] end

function shared.load(storage, list)
  list = list or listed[storage]
  if type(list) ~= 'table' then
    error('threads.sharedserialize.load: a storage made by threads.sharedserialize.save expected', 2)
  end
  return shared.loadListing(storage, list)
end

return shared
