-- threads.serialize: save(obj) -> a torch.CharStorage of obj in torch's binary format (Lua
-- functions with their upvalues included); load(storage) -> a copy of obj. A pool sends its
-- jobs and their results this way unless told otherwise (Threads.serialization).
require 'torch'
local serialize = {}

function serialize.save(obj)
  local f = torch.MemoryFile()
  f:binary()
  f:writeObject(obj)
  local storage = f:storage()
  f:close()
  return storage
end

function serialize.load(storage)
  local f = torch.MemoryFile(storage)
  f:binary()
  local obj = f:readObject()
  f:close()
  return obj
end

return serialize
