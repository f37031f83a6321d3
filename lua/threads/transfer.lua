-- What crosses between Lua runtimes (luabridge/threads.py carries it): an object as the
-- CharStorage its serialization module wrote, plus a list of storages whose buffers Python
-- hands to the receiving runtime, which makes storages over them here. threads.sharedserialize
-- lists every storage (shared memory); for threads.serialize, storages of MOVE_BYTES or more
-- are listed as fresh copies (the receiver's alone, as a copy through the bytes would be, but
-- copied once instead of written into the bytes and read back); other modules list nothing.
require 'torch'
local memory = require 'torch.core.memory'
local plain = require 'threads.serialize'
-- (required on use: it requires tds, whose AtomicCounter requires this module)
local function shared() return require 'threads.sharedserialize' end

local transfer = {}
transfer.MOVE_BYTES = 64 * 1024

local function bigCopies(kind, o)
  if not kind.storage or o:size() * o:elementSize() < transfer.MOVE_BYTES then return nil end
  return getmetatable(o).__constructor():_resizeForOverwrite(o:size()):copy(o)
end

-- obj -> the storage holding it, the list of storages that travel beside it.
function transfer.pack(serializer, obj)
  if serializer == plain then return shared().saveListing(obj, bigCopies) end
  local storage = serializer.save(obj)
  local sharedOf = rawget(serializer, 'sharedOf')
  return storage, sharedOf and sharedOf(storage) or {}
end

function transfer.unpack(serializer, storage, list)
  if serializer == plain then return shared().loadListing(storage, list) end
  return serializer.load(storage, list)
end

-- The storages over the buffers Python registered in this runtime, from its flat list: id,
-- address high, address low, element count, element type name for each.
function transfer.storages(flat)
  local out = {}
  for i = 1, #flat, 5 do
    local s = torch._storageFromBuffer(flat[i + 4], flat[i], flat[i + 1], flat[i + 2], flat[i + 3])
    -- as luabridge.from_numpy: the collector counts what the storage keeps alive
    memory.account(s:size() * s:elementSize())
    out[#out + 1] = s
  end
  return out
end

return transfer
