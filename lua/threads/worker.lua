-- A pool worker's side (each worker runs in a Lua runtime of its own, on its own OS thread;
-- luabridge/threads.py drives it): start sets __threadid and the pool's serialization, run
-- reads a job, runs it and writes back what it returned, or the error with its traceback.
local transfer = require 'threads.transfer'
require 'threads'   -- the classes jobs may carry (Mutex, Condition)

local worker = {}
local serializer

-- A worker keeps released buffers for reuse in Lua (torch.memory.reuse): a loader allocates the
-- same sizes sample after sample, and reusing them here spares a Python call (and the GIL the
-- other workers wait for) per tensor. 64 MiB: what dies between two of torch.memory's
-- collections (one every 64 MiB allocated).
local REUSE_BYTES = 64 * 1024 * 1024

-- package.path: the main runtime's at the pool's creation, so that jobs find the same modules.
function worker.start(id, serialization, path)
  rawset(_G, '__threadid', id)
  require('torch.core.memory').reuse(REUSE_BYTES)
  package.path = path
  serializer = require(serialization)
end

local function pack(...) return { n = select('#', ...), ... } end

-- debug.traceback, cut where the job was called: the frames below are this module's.
local function traceback(err)
  local text = debug.traceback(tostring(err), 2)
  return (text:gsub('\n\t%[C%]: in function \'xpcall\'\n.*$', ''))
end

-- payload, shared: the buffers' descriptions transfer.storages reads (the job's bytes, the
-- storages beside them). Returns true, the results' storage and the storages to send beside
-- it; or false and the message.
function worker.run(payload, shared)
  local ok, job = pcall(function()
    return transfer.unpack(serializer, transfer.storages(payload)[1], transfer.storages(shared))
  end)
  if not ok then return false, 'cannot read the job: ' .. tostring(job) end
  local results = pack(xpcall(function() return job.callback(unpack(job, 1, job.n)) end, traceback))
  if not results[1] then return false, tostring(results[2]) end
  local okPack, storage, sharedOut = pcall(transfer.pack, serializer, pack(unpack(results, 2, results.n)))
  if not okPack then return false, 'cannot send the results back: ' .. tostring(storage) end
  return true, storage, sharedOut
end

return worker
