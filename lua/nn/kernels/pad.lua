-- Spatial padding (zero, reflection, replication; negative padding crops) of planes x H x W
-- input: each output row and column reads one input row and column, given by two index maps
-- built per call (-1: a zero). The backward pass adds each gradient back where it was read.
local ffi = require 'ffi'
local apply = require 'torch.backend.cpu.apply'
local shape = require 'nn.kernels.shape'
local unfold = require 'nn.kernels.unfold'

local pad = {}

-- the input index (0-based) that output index x - lo reads, or -1, for an input size n
local sources = {
  zero = function(x, n) return (x >= 0 and x < n) and x or -1 end,
  replication = function(x, n) return math.min(math.max(x, 0), n - 1) end,
  reflection = function(x, n)
    if x < 0 then return -x end
    if x >= n then return 2 * (n - 1) - x end
    return x
  end,
}

local loop = [[
return function(ip, io, op, oo, P, H, W, oH, oW, rows, cols, backward)
  for p = 0, P - 1 do
    local ib, ob = io + p * H * W, oo + p * oH * oW
    for i = 0, oH - 1 do
      local r = rows[i]
      local orow = ob + i * oW
      if r < 0 then
        if not backward then for j = 0, oW - 1 do op[orow + j] = 0 end end
      else
        local irow = ib + r * W
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
end]]
local loops = apply.perType('pad', loop)

local function indexMap(mode, n, lo, on)
  local m = ffi.new('int32_t[?]', on)
  local src = sources[mode]
  for x = 0, on - 1 do m[x] = src(x - lo, n) end
  return m
end

-- Checks input and returns the geometry: sizes of input planes and output, output sizes.
local function geometry(self, input, mode)
  local batch, B, C, s = shape.input(self, input, 2)
  local H, W = s[1], s[2]
  local oH, oW = H + self.pad_t + self.pad_b, W + self.pad_l + self.pad_r
  shape.output(self, input, { oH, oW }, ('padding l=%d, r=%d, t=%d, b=%d'):format(
    self.pad_l, self.pad_r, self.pad_t, self.pad_b))
  if mode == 'reflection' and (math.max(self.pad_l, self.pad_r) >= W or math.max(self.pad_t, self.pad_b) >= H) then
    shape.fail(self, 'padding (l=%d, r=%d, t=%d, b=%d) must be smaller than the input planes (%dx%d)',
      self.pad_l, self.pad_r, self.pad_t, self.pad_b, H, W)
  end
  local sizes = batch and { B, C, oH, oW } or { C, oH, oW }
  return { P = B * C, H = H, W = W, oH = oH, oW = oW, sizes = sizes }
end

local function run(self, mode, inp, out, g, backward)
  loops[inp._dt](inp._st._ptr, inp._off, out._st._ptr, out._off, g.P, g.H, g.W, g.oH, g.oW,
    indexMap(mode, g.H, self.pad_t, g.oH), indexMap(mode, g.W, self.pad_l, g.oW), backward)
end

-- Installs torch7's constructor (pad_l[, pad_r, pad_t, pad_b], the missing ones = pad_l), the
-- passes and the printing on a padding class.
function pad.install(cls, mode)
  local parent = nn.Module
  function cls:__init(l, r, t, b)
    parent.__init(self)
    self.pad_l = l
    self.pad_r, self.pad_t, self.pad_b = r or l, t or l, b or l
    for _, v in ipairs { self.pad_l, self.pad_r, self.pad_t, self.pad_b } do
      if type(v) ~= 'number' or v ~= math.floor(v) then
        shape.fail(self, 'paddings must be integers, got %s, %s, %s, %s', tostring(l), tostring(r),
          tostring(t), tostring(b))
      end
    end
  end
  function cls:updateOutput(input)
    local g = geometry(self, input, mode)
    input = input:contiguous()
    self.output:resize(g.sizes)
    run(self, mode, input, self.output, g, false)
    return self.output
  end
  function cls:updateGradInput(input, gradOutput)
    local g = geometry(self, input, mode)
    shape.gradOutput(self, gradOutput, g.sizes)
    gradOutput = gradOutput:contiguous()
    self.gradInput:resizeAs(input)
    unfold.zero(self.gradInput)
    run(self, mode, self.gradInput, gradOutput, g, true)
    return self.gradInput
  end
  function cls:__tostring__()
    return torch.type(self) .. ('(l=%d, r=%d, t=%d, b=%d)'):format(self.pad_l, self.pad_r,
      self.pad_t, self.pad_b)
  end
end

return pad
