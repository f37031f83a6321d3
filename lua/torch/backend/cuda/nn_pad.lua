-- The CUDA op table's padding (the CPU op: backend/cpu/nn_pad.lua, the same arguments): one
-- gather matrix per padded dim, from the index maps (-1: a zero), run as plane maps
-- (planemaps.lua) over the last dims of inp and out (B x C x (T x) H x W, contiguous). A frame
-- map that keeps one frame as it is (2D padding) is left out.
local backend = require 'torch.backend'
local planemaps = require 'torch.backend.cuda.planemaps'

backend.register('cuda', {
  pad_planes = function(inp, out, _, T, H, W, oT, oH, oW, frames, rows, cols, backward)
    local matrices = {}
    local function gather(O, I, map)
      matrices[#matrices + 1] = planemaps.gather(O, I, function(o) return map[o] end)
    end
    if not (T == 1 and oT == 1 and frames[0] == 0) then gather(oT, T, frames) end
    gather(oH, H, rows)
    gather(oW, W, cols)
    if backward then planemaps.run(inp, out, true, unpack(matrices))
    else planemaps.run(out, inp, false, unpack(matrices)) end
  end,
})
