-- Spatial and volumetric padding (zero, reflection, replication; negative padding crops) of
-- planes x (T x) H x W input: each output frame, row and column reads one input frame, row and
-- column, given by index maps built per call (-1: a zero). The backward pass adds each
-- gradient back where it was read: the op pad_planes of the tensors' backend
-- (backend/cpu/nn_pad.lua, backend/cuda/nn_pad.lua: plane maps).
local ffi = require 'ffi'
local backend = require 'torch.backend'
local shape = require 'nn.util.shape'

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

local function indexMap(mode, n, lo, on)
  local m = ffi.new('int32_t[?]', on)
  local src = sources[mode]
  for x = 0, on - 1 do m[x] = src(x - lo, n) end
  return m
end

-- The paddings (low, high) of each padded dim (time, rows, columns), from torch7's fields.
local function paddings(self)
  if self.pfront then
    return { { self.pfront, self.pback }, { self.ptop, self.pbottom }, { self.pleft, self.pright } }
  end
  return { { self.pad_t, self.pad_b }, { self.pad_l, self.pad_r } }
end

-- Checks input and returns the geometry: plane count, input and output sizes (3 dims, time 1
-- for 2D) and the output's sizes.
local function geometry(self, input, mode)
  local pads = paddings(self)
  local sd = #pads
  local batch, B, C, s = shape.input(self, input, sd)
  local I, O, shown = { 1, 1, 1 }, { 1, 1, 1 }, {}
  for d = 1, sd do
    local k = 3 - sd + d
    I[k], O[k] = s[d], s[d] + pads[d][1] + pads[d][2]
    shown[d] = O[k]
    if mode == 'reflection' and math.max(pads[d][1], pads[d][2]) >= s[d] then
      shape.fail(self, 'padding %s must be smaller than the input planes (%s)',
        tostring(self):match('%(.*%)'), table.concat(s, 'x'))
    end
  end
  shape.output(self, input, shown, 'padding ' .. tostring(self):match('%((.*)%)'))
  local sizes = { C, unpack(shown) }
  if batch then table.insert(sizes, 1, B) end
  local full = { { 0, 0 }, { 0, 0 }, { 0, 0 } }
  for d = 1, sd do full[3 - sd + d] = pads[d] end
  return { P = B * C, I = I, O = O, pads = full, sizes = sizes, sd = sd }
end

local function run(mode, inp, out, g, backward)
  local I, O, p = g.I, g.O, g.pads
  backend.of(inp).pad_planes(inp, out, g.P, I[1], I[2], I[3], O[1], O[2], O[3],
    indexMap(mode, I[1], p[1][1], O[1]), indexMap(mode, I[2], p[2][1], O[2]),
    indexMap(mode, I[3], p[3][1], O[3]), backward)
end

-- Installs torch7's constructor (the padding fields `names`, default pad_l, pad_r, pad_t,
-- pad_b; the missing ones = the first), the passes and the printing (`labels`) on a class.
function pad.install(cls, mode, names, labels)
  local parent = nn.Module
  cls._deviceKernel = true   -- device tensors: the CUDA pad_planes
  names = names or { 'pad_l', 'pad_r', 'pad_t', 'pad_b' }
  labels = labels or { 'l', 'r', 't', 'b' }
  function cls:__init(first, ...)
    parent.__init(self)
    local given = { first, ... }
    for i, name in ipairs(names) do
      local v = given[i] or first
      if type(v) ~= 'number' or v ~= math.floor(v) then
        shape.fail(self, 'paddings must be integers, got %s for %s', tostring(v), name)
      end
      self[name] = v
    end
  end
  function cls:updateOutput(input)
    local g = geometry(self, input, mode)
    input = input:contiguous()
    self.output:resize(g.sizes)
    run(mode, input, self.output, g, false)
    return self.output
  end
  function cls:updateGradInput(input, gradOutput)
    local g = geometry(self, input, mode)
    shape.gradOutput(self, gradOutput, g.sizes)
    gradOutput = gradOutput:contiguous()
    self.gradInput:resizeAs(input)
    run(mode, self.gradInput, gradOutput, g, true)
    return self.gradInput
  end
  function cls:__tostring__()
    local parts = {}
    for i, name in ipairs(names) do parts[i] = ('%s=%d'):format(labels[i], self[name]) end
    return torch.type(self) .. '(' .. table.concat(parts, ', ') .. ')'
  end
end

return pad
