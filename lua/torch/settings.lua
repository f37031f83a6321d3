-- Process-wide knobs torch7 scripts set: BLAS threads and heap tracking.
local torch = require 'torch.env'
local check = require 'torch.check'
local blas = require 'torch.backend.cpu.blas'
local memory = require 'torch.memory'

-- The threads luabridge's CPU work may use (default: the cores this process may run on). The
-- BLAS products take up to this many, fewer for small ones (backend/cpu/blas.lua).
function torch.setnumthreads(n)
  if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
    check.error('setnumthreads: expected a positive integer, got ' .. tostring(n))
  end
  blas.setThreads(n)
end

function torch.getnumthreads()
  return blas.threads
end

-- With tracking on (the default), the collector runs after every 64 MiB of new tensor memory,
-- so dead tensors give their buffers back promptly.
function torch.setheaptracking(on)
  memory.tracking = on and true or false
  torch._heaptracking = memory.tracking
end
torch._heaptracking = memory.tracking
