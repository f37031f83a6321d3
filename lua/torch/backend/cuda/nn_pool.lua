-- The CUDA op table's pooling passes (the CPU ones: backend/cpu/nn_pool.lua): marshallers to
-- the array module's code in luabridge/backend/cuda_nn.py, which takes the output size and window
-- geometry as numbers. Operands arrive checked, results sized.
local backend = require 'torch.backend'
local check = require 'torch.core.check'
local call = require('torch.backend.cuda.core').call
local planemaps = require 'torch.backend.cuda.planemaps'

-- The output size and window geometry of a 2D pooling (nn/util/pool.lua's geometry); the
-- array module has no volumetric pooling.
local function poolWindows(g)
  local p = g.p
  if g.I[1] ~= 1 or p.k[1] ~= 1 then check.error('volumetric pooling is not available for CUDA tensors') end
  return g.O[2], g.O[3], p.k[2], p.k[3], p.d[2], p.d[3], p.pad[2], p.pad[3], p.dil[2], p.dil[3]
end

backend.register('cuda', {
  pool_max_forward = function(g, output, indices, input)
    call('max_pool_forward', output, indices, input, poolWindows(g))
  end,
  pool_max_backward = function(g, gradInput, gradOutput, indices)
    poolWindows(g)
    call('max_pool_backward', gradInput, gradOutput, indices)
  end,
  -- countPad: the divisor counts the padding; divide = false: the windows' sums
  pool_avg_forward = function(g, output, input, countPad, divide)
    local oH, oW, kH, kW, dH, dW, padH, padW = poolWindows(g)
    call('avg_pool_forward', output, input, oH, oW, countPad, divide, kH, kW, dH, dW, padH, padW, 1, 1)
  end,
  adaptive_max_forward = function(output, indices, input, oH, oW)
    call('adaptive_max_forward', output, indices, input, oH, oW)
  end,
  -- indices: 1-based offsets in the planes (as max pooling's)
  adaptive_max_backward = function(gradInput, gradOutput, indices)
    call('max_pool_backward', gradInput, gradOutput, indices)
  end,
  -- adaptive averages: one matrix per spatial dim (planemaps.lua) over the input's last two
  adaptive_avg_forward = function(output, input, oH, oW)
    local d = input:dim()
    planemaps.run(output, input, false, planemaps.adaptiveAverage(oH, input:size(d - 1)),
      planemaps.adaptiveAverage(oW, input:size(d)))
  end,
  adaptive_avg_backward = function(gradInput, gradOutput, oH, oW)
    local d = gradInput:dim()
    planemaps.run(gradInput, gradOutput, true, planemaps.adaptiveAverage(oH, gradInput:size(d - 1)),
      planemaps.adaptiveAverage(oW, gradInput:size(d)))
  end,
  pool_avg_backward = function(g, gradInput, gradOutput, countPad, divide)
    local oH, oW, kH, kW, dH, dW, padH, padW = poolWindows(g)
    call('avg_pool_backward', gradInput, gradOutput, oH, oW, countPad, divide, kH, kW, dH, dW, padH, padW, 1, 1)
  end,
})

-- CPU only (the modules check for host tensors first: max unpooling, SpatialSubSampling; the
-- CPU ops: backend/cpu/nn_pool.lua and planes.lua)
backend.lacks('cuda', { 'max_unpool', 'plane_map', 'plane_acc_sum', 'plane_fill' })
