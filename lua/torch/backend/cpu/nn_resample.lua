-- The CPU op resample (SpatialUpSamplingNearest, nnx's SpatialReSampling ...; the CUDA one, plane
-- maps: backend/cuda/nn_resample.lua): upsampling of P planes of H x W to oH x oW, nearest
-- neighbour (integer scale) and bilinear with the corners aligned (output y reads input
-- y * (H-1)/(oH-1)), forward and backward.
local backend = require 'torch.backend'
local loopsFor = require 'torch.backend.cpu.loops'
local ptr = require('torch.backend.cpu.apply').ptr

local nearest = loopsFor.perType('upsampling nearest', [[
local floor = math.floor
return function(ip, op, P, H, W, oH, oW, s, backward)
  for p = 0, P - 1 do
    local ib, ob = p * H * W, p * oH * oW
    for y = 0, oH - 1 do
      local irow, orow = ib + floor(y / s) * W, ob + y * oW
      for x = 0, oW - 1 do
        local i = irow + floor(x / s)
        if backward then ip[i] = ip[i] + op[orow + x] else op[orow + x] = ip[i] end
      end
    end
  end
end]])

local bilinear = loopsFor.perType('upsampling bilinear', [[
local floor = math.floor
return function(ip, op, P, H, W, oH, oW, backward)
  local rh = oH > 1 and (H - 1) / (oH - 1) or 0
  local rw = oW > 1 and (W - 1) / (oW - 1) or 0
  for p = 0, P - 1 do
    local ib, ob = p * H * W, p * oH * oW
    for y = 0, oH - 1 do
      local yr = rh * y
      local y0 = floor(yr)
      local dy = y0 < H - 1 and W or 0
      local ly = yr - y0
      for x = 0, oW - 1 do
        local xr = rw * x
        local x0 = floor(xr)
        local dx = x0 < W - 1 and 1 or 0
        local lx = xr - x0
        local i, o = ib + y0 * W + x0, ob + y * oW + x
        if backward then
          local g = op[o]
          ip[i] = ip[i] + (1 - ly) * (1 - lx) * g
          ip[i + dx] = ip[i + dx] + (1 - ly) * lx * g
          ip[i + dy] = ip[i + dy] + ly * (1 - lx) * g
          ip[i + dy + dx] = ip[i + dy + dx] + ly * lx * g
        else
          op[o] = (1 - ly) * ((1 - lx) * ip[i] + lx * ip[i + dx])
            + ly * ((1 - lx) * ip[i + dy] + lx * ip[i + dy + dx])
        end
      end
    end
  end
end]])

-- small: P x H x W, big: P x oH x oW (both contiguous); forward writes big, backward small
backend.register('cpu', {
  resample = function(mode, small, big, P, H, W, oH, oW, scale, backward)
    if backward then small:zero() else big:zero() end
    if mode == 'nearest' then
      nearest[torch.typename(small)](ptr(small), ptr(big), P, H, W, oH, oW, scale, backward)
    else
      bilinear[torch.typename(small)](ptr(small), ptr(big), P, H, W, oH, oW, backward)
    end
  end,
})
