-- The CUDA passes of the layers whose output is a linear map of each input plane, one matrix per
-- spatial dim (padding, nearest and bilinear upsampling, adaptive average pooling, the channel
-- windows of LRN): the output is the input with its last dims each multiplied by an O x I matrix
-- (the backward pass: by the transposes), built here in host memory from the layer's rule and
-- run by the op plane_maps (backend/cuda/nn.lua) in one call. The ops using them:
-- backend/cuda/nn_pad.lua, nn_resample.lua, nn_pool.lua, nn_lrn.lua.
local backend = require 'torch.backend'

local planemaps = {}

-- The O x I DoubleTensor of the rule taps(o, add): output o (0-based) reads input i with
-- weight w for each add(i, w).
function planemaps.matrix(O, I, taps)
  local m = torch.DoubleTensor(O, I):zero()
  local p = backend.cpu.ptr(m)
  local row = 0
  local function add(i, w) p[row + i] = p[row + i] + w end
  for o = 0, O - 1 do
    row = o * I
    taps(o, add)
  end
  return m
end

-- out = x mapped by the matrices (one per trailing dim, in order); backward: out is the input's
-- gradient and x the output's.
function planemaps.run(out, x, backward, ...)
  backend.cuda.plane_maps(out, x, backward, ...)
end

-- The rules. An index map source(o) -> input index or -1 (a zero): padding.
function planemaps.gather(O, I, source)
  return planemaps.matrix(O, I, function(o, add)
    local i = source(o)
    if i >= 0 then add(i, 1) end
  end)
end

-- Linear interpolation with the corners aligned (output o reads input o (I - 1) / (O - 1)).
function planemaps.bilinear(O, I)
  local r = O > 1 and (I - 1) / (O - 1) or 0
  return planemaps.matrix(O, I, function(o, add)
    local at = r * o
    local i = math.floor(at)
    local l = at - i
    add(i, 1 - l)
    add(i < I - 1 and i + 1 or i, l)
  end)
end

-- Adaptive averaging: output o averages inputs [floor(o I / O), ceil((o + 1) I / O)).
function planemaps.adaptiveAverage(O, I)
  return planemaps.matrix(O, I, function(o, add)
    local i0, i1 = math.floor(o * I / O), math.ceil((o + 1) * I / O)
    for i = i0, i1 - 1 do add(i, 1 / (i1 - i0)) end
  end)
end

return planemaps
