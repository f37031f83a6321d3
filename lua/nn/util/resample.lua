-- Upsampling of P planes of H x W to oH x oW: nearest neighbour (integer scale) and bilinear
-- with the corners aligned (output y reads input y * (H-1)/(oH-1)), forward and backward. CPU
-- tensors run the op resample (backend/cpu/nn_resample.lua); device tensors plane maps.
local backend = require 'torch.backend'
local planemaps = require 'nn.util.planemaps'

local resample = {}

-- small: P x H x W, big: P x oH x oW (both contiguous); forward writes big, backward small.
-- On device tensors: the rules as one matrix per dim (planemaps.lua).
local function deviceRun(mode, small, big, H, W, oH, oW, scale, backward)
  local rows, cols
  if mode == 'nearest' then
    local function nearest(O, I) return planemaps.gather(O, I, function(o) return math.floor(o / scale) end) end
    rows, cols = nearest(oH, H), nearest(oW, W)
  else
    rows, cols = planemaps.bilinear(oH, H), planemaps.bilinear(oW, W)
  end
  if backward then planemaps.run(small, big, true, rows, cols)
  else planemaps.run(big, small, false, rows, cols) end
end

function resample.run(mode, small, big, P, H, W, oH, oW, scale, backward)
  if backend.of(small) ~= backend.cpu then return deviceRun(mode, small, big, H, W, oH, oW, scale, backward) end
  backend.cpu.resample(mode, small, big, P, H, W, oH, oW, scale, backward)
end

return resample
