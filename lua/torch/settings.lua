-- Process-wide knobs torch7 scripts set: BLAS threads and heap tracking.
local torch = require 'torch.env'
local check = require 'torch.core.check'
local host = require('torch.backend').host
local memory = require 'torch.core.memory'

-- The threads luabridge's CPU work may use (default: the cores this process may run on). The
-- BLAS products take up to this many, fewer for small ones (backend/cpu/blas.lua, through the products family's ops).
function torch.setnumthreads(n)
  if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
    check.error('setnumthreads: expected a positive integer, got ' .. tostring(n))
  end
  host.set_threads(n)
end

function torch.getnumthreads()
  return host.threads()
end

-- With tracking on (the default), the collector runs after every 64 MiB of new tensor memory,
-- so dead tensors give their buffers back promptly.
function torch.setheaptracking(on)
  memory.tracking = on and true or false
  torch._heaptracking = memory.tracking
end
torch._heaptracking = memory.tracking

-- The machine's online CPUs (torch7: omp_get_num_procs).
function torch.getnumcores()
  return host.cpus()
end

-- Whether a Lua file (io.stdin, io.stdout, io.stderr) is a terminal, as torch7's isatty: the
-- standard streams are asked by their descriptors; any other file is not a terminal.
local ffi = require 'ffi'
pcall(ffi.cdef, 'int isatty(int fd);')
local DESCRIPTORS = { [io.stdin] = 0, [io.stdout] = 1, [io.stderr] = 2 }
function torch.isatty(file)
  if io.type(file) ~= 'file' then
    check.error('isatty: expected a file (io.stdout, ...), got ' .. torch.type(file))
  end
  local fd = DESCRIPTORS[file]
  return fd ~= nil and ffi.C.isatty(fd) == 1
end

-- Whether two torch objects are the same object underneath (luaT's isequal: one C pointer).
function torch.isequal(a, b)
  return torch.typename(a) ~= nil and torch.typename(b) ~= nil and torch.pointer(a) == torch.pointer(b)
end

-- torch7 re-pointed TH's error handlers at the calling Lua state; errors here are Lua errors.
function torch.updateerrorhandlers()
end
