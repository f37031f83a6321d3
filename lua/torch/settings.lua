-- Process-wide knobs torch7 scripts set: BLAS threads and heap tracking.
local torch = require 'torch.env'
local check = require 'torch.check'
local blas = require 'torch.backend.cpu.blas'
local memory = require 'torch.memory'

-- The number of threads the BLAS products use (OpenBLAS's setting; 1 without OpenBLAS).
function torch.setnumthreads(n)
  if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
    check.error('setnumthreads: expected a positive integer, got ' .. tostring(n))
  end
  if blas.setThreads then blas.setThreads(n) end
end

function torch.getnumthreads()
  return blas.getThreads and blas.getThreads() or 1
end

-- With tracking on (the default), the collector runs after every 64 MiB of new tensor memory,
-- so dead tensors give their buffers back promptly.
function torch.setheaptracking(on)
  memory.tracking = on and true or false
  torch._heaptracking = memory.tracking
end
torch._heaptracking = memory.tracking
