-- The CUDA op table's upsampling (the CPU op: backend/cpu/nn_resample.lua, the same arguments):
-- small P x H x W, big P x oH x oW (both contiguous); forward writes big, backward small. The
-- rules as one matrix per dim (planemaps.lua): nearest neighbour (integer scale) and bilinear
-- with the corners aligned.
local backend = require 'torch.backend'
local planemaps = require 'torch.backend.cuda.planemaps'

backend.register('cuda', {
  resample = function(mode, small, big, _, H, W, oH, oW, scale, backward)
    local rows, cols
    if mode == 'nearest' then
      local function nearest(O, I) return planemaps.gather(O, I, function(o) return math.floor(o / scale) end) end
      rows, cols = nearest(oH, H), nearest(oW, W)
    else
      rows, cols = planemaps.bilinear(oH, H), planemaps.bilinear(oW, W)
    end
    if backward then planemaps.run(small, big, true, rows, cols)
    else planemaps.run(big, small, false, rows, cols) end
  end,
})
