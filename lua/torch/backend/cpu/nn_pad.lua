-- The CPU op pad_planes of the padding modules (zero, reflection, replication; negative padding
-- crops; their front end: nn/util/pad.lua; the CUDA op: backend/cuda/nn_pad.lua): each output frame, row and column
-- of planes x (T x) H x W input reads one input frame, row and column, given by index maps
-- (-1: a zero); the backward pass adds each gradient back where it was read.
local backend = require 'torch.backend'
local loopsFor = require 'torch.backend.cpu.loops'
local ptr = require('torch.backend.cpu.apply').ptr

local loop = [[
return function(ip, op, P, T, H, W, oT, oH, oW, frames, rows, cols, backward)
  for p = 0, P - 1 do
    local ib, ob = p * T * H * W, p * oT * oH * oW
    for t = 0, oT - 1 do
      local f = frames[t]
      for i = 0, oH - 1 do
        local r = rows[i]
        local orow = ob + (t * oH + i) * oW
        if r < 0 or f < 0 then
          if not backward then for j = 0, oW - 1 do op[orow + j] = 0 end end
        else
          local irow = ib + (f * H + r) * W
          for j = 0, oW - 1 do
            local c = cols[j]
            if backward then
              if c >= 0 then ip[irow + c] = ip[irow + c] + op[orow + j] end
            elseif c >= 0 then op[orow + j] = ip[irow + c]
            else op[orow + j] = 0 end
          end
        end
      end
    end
  end
end]]
local loops = loopsFor.perType('pad', loop)

-- inp, out contiguous (P x T x H x W, P x oT x oH x oW); frames, rows, cols: int32 index maps of
-- oT, oH, oW entries; backward: inp = out read back through the maps (added up)
backend.register('cpu', {
  pad_planes = function(inp, out, P, T, H, W, oT, oH, oW, frames, rows, cols, backward)
    if backward then inp:zero() end
    loops[torch.typename(inp)](ptr(inp), ptr(out), P, T, H, W, oT, oH, oW, frames, rows, cols, backward)
  end,
})
