-- cutorch: the CUDA tensor types (torch.CudaTensor, ...) and device functions.
-- With a device (CuPy sees a GPU, or LUABRIDGE_CUDA_ARRAY_MODULE=numpy) the types are those of
-- lua/torch/backend/cuda/. Without one, LUABRIDGE_CUDA_ON_CPU=1 runs CUDA code on the CPU:
-- each CUDA type name stands for its CPU type (torch.CudaTensor is torch.FloatTensor,
-- torch.CudaLongTensor torch.LongTensor, ...) and x:cuda() converts to FloatTensor (x itself when
-- it is one). Without either, require 'cutorch' raises an error saying so.
require 'torch'
local cuda = require('torch.backend').load('cuda')
local check = require 'torch.core.check'

local before = rawget(_G, 'cutorch')
cutorch = before or {}

local ok, why = pcall(torch.CudaStorage, 1)
local onCpu = not ok
if onCpu then
  if os.getenv('LUABRIDGE_CUDA_ON_CPU') ~= '1' then
    why = tostring(why):gsub('^.-torch%.CudaStorage: ', '')
    -- a failed loader leaves require's sentinel behind ("loop or previous error loading
    -- module" next time): drop it, so that every require 'cutorch' fails with this message
    package.loaded.cutorch = nil
    -- and no `cutorch` global either: code tests `if cutorch then` after pcall(require, 'cutorch'),
    -- as under a Torch7 without cutorch (torch-autograd's test.lua:747)
    rawset(_G, 'cutorch', before)
    error("cutorch: " .. why .. '; set LUABRIDGE_CUDA_ON_CPU=1 to run CUDA code on the CPU ' ..
          '(CUDA tensors become FloatTensors, cudnn modules run on the CPU)', 2)
  end
  -- each CUDA type name stands for the CPU type with the same elements
  for host, dt in pairs(cuda.dtypes) do
    for _, kind in ipairs { 'Tensor', 'Storage' } do
      torch._registermetatable('torch.' .. dt.name .. kind, torch.getmetatable('torch.' .. host .. kind))
      rawset(torch, dt.name .. kind, torch[host .. kind])
    end
    local cpuType = 'torch.' .. host .. 'Tensor'
    torch._method(cuda.converterName(dt), function(t) return t:type(cpuType) end)
  end
end
cutorch.onCPU = onCpu   -- true when CUDA code runs on the CPU (LUABRIDGE_CUDA_ON_CPU=1)

-- One device, numbered 1: checkDevice raises fname's error for any other number.
local function checkDevice(fname, i)
  if i ~= 1 then check.error(('%s: device %s does not exist (1 device)'):format(fname, tostring(i))) end
end
function cutorch.getDeviceCount() return 1 end
function cutorch.getDevice() return 1 end
function cutorch.setDevice(i) checkDevice('cutorch.setDevice', i) end
function cutorch.withDevice(i, fn)
  cutorch.setDevice(i)
  return fn()
end
function cutorch.synchronize() end
cutorch.synchronizeAll = cutorch.synchronize

-- cutorch.setHeapTracking(enabled): cutorch ran Lua's collector when the device heap grew; the
-- memory here is the host's (or CuPy's pool), so it only checks its argument, as cutorch did.
function cutorch.setHeapTracking(enabled)
  if type(enabled) ~= 'boolean' then
    check.error('cutorch.setHeapTracking: a boolean expected, got ' .. type(enabled))
  end
end

-- Peer access between devices: always on with a single device.
function cutorch.getPeerToPeerAccess() return true end
function cutorch.setPeerToPeerAccess() end
function cutorch.getKernelPeerToPeerAccess() return true end
function cutorch.setKernelPeerToPeerAccess() end

local hostMemory = require 'cutorch.host'

-- cutorch.getMemoryUsage([device]): free and total bytes of the device's memory.
function cutorch.getMemoryUsage(device)
  checkDevice('cutorch.getMemoryUsage', device or 1)
  if not onCpu then
    check.error('cutorch.getMemoryUsage: the device memory report is not available with the CUDA backend '
                .. '(only with LUABRIDGE_CUDA_ON_CPU=1, where it reports the host memory)')
  end
  return hostMemory()
end

function cutorch.getDeviceProperties(i)
  cutorch.setDevice(i)
  local props = { name = onCpu and 'CPU (LUABRIDGE_CUDA_ON_CPU)' or 'luabridge CUDA device', major = 0, minor = 0 }
  local ok, free, total = pcall(cutorch.getMemoryUsage, i)   -- the host's, on the CPU
  if ok then props.freeGlobalMem, props.totalGlobalMem = free, total end
  return props
end

-- The CUDA generator: torch's own when CUDA tensors live on the CPU.
local seed = onCpu and torch.manualSeed or torch.cudaManualSeed
function cutorch.manualSeed(s) seed(s) end
cutorch.manualSeedAll = cutorch.manualSeed

return cutorch
