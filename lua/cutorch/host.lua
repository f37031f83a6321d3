-- cutorch's host-side helpers: page-locked host tensors (cutorch.createCudaHostTensor and its
-- Half / Double forms, which training scripts use as staging buffers for copies to the GPU) and
-- the memory report. Pinned memory is ordinary CPU memory here: the copies it speeds up in
-- cutorch are plain copies in luabridge.
local check = require 'torch.core.check'

-- createCudaHost<Kind>Tensor(sizes... | LongStorage): a CPU tensor of that type and size.
local function hostTensor(typeName)
  return function(...)
    local size = torch.isStorage((...)) and (...) or torch.LongStorage({ ... })
    return torch[typeName](size)
  end
end
cutorch.createCudaHostTensor = hostTensor('FloatTensor')
cutorch.createCudaHostHalfTensor = hostTensor('HalfTensor')
cutorch.createCudaHostDoubleTensor = hostTensor('DoubleTensor')

-- The host's available and total memory in bytes (/proc/meminfo), where CUDA tensors live when
-- they run on the CPU.
local function hostMemory()
  local f = io.open('/proc/meminfo')
  local text = f and f:read('*a')
  if f then f:close() end
  local total = text and text:match('MemTotal:%s*(%d+) kB')
  local free = text and text:match('MemAvailable:%s*(%d+) kB')
  if not (total and free) then
    check.error('cutorch.getMemoryUsage: cannot read the host memory (no /proc/meminfo)')
  end
  return tonumber(free) * 1024, tonumber(total) * 1024
end

return hostMemory
