-- What crosses between Lua runtimes (luabridge/threads.py carries it): an object as the
-- CharStorage its serialization module wrote, plus the storages that module shares without a
-- copy (threads.sharedserialize's; none for threads.serialize). Python hands each buffer to the
-- receiving runtime, which makes storages over it here.
require 'torch'
local memory = require 'torch.memory'

local transfer = {}

-- obj -> the storage holding it, the list of storages it shares.
function transfer.pack(serializer, obj)
  local storage = serializer.save(obj)
  local sharedOf = rawget(serializer, 'sharedOf')
  return storage, sharedOf and sharedOf(storage) or {}
end

function transfer.unpack(serializer, storage, shared)
  return serializer.load(storage, shared)
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
