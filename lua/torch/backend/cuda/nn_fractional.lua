-- The nn_fractional family on CUDA: SpatialFractionalMaxPooling is CPU only. Its ops name the
-- tensor type a device tensor brings, with the words of the CPU loops
-- (backend/cpu/nn_fractional.lua) that a device tensor used to reach.
local backend = require 'torch.backend'
local check = require 'torch.core.check'

backend.register('cuda', {
  fractional_max_forward = function(input)
    check.error(('fractional max pooling: %s is not supported (a CPU loop)'):format(torch.typename(input)))
  end,
  fractional_max_backward = function(gradInput)
    check.error(('fractional max pooling backward: %s is not supported (a CPU loop)'):format(
      torch.typename(gradInput)))
  end,
})
