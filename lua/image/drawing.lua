-- Drawing on 3 x H x W images (drawRect, drawText) and false-colour maps (y2jet, jetColormap,
-- colormap). Colours are 0..255 triples; float images get them over 255.
local util = require 'image.util'
local py = rawget(_G, '__luabridge_py')

local function target(fn, src, opts)
  if not (torch.isTensor(src) and src:dim() == 3 and src:size(1) == 3) then
    error(fn .. ': input image has to be a 3D tensor of shape 3 x H x W, got ' .. util.describe(src), 3)
  end
  util.image(fn, src)
  return opts.inplace and src or src:clone()
end

-- a {r, g, b} table of numbers (0..255)
local function rgb(fn, what, c)
  if type(c) ~= 'table' or type(c[1]) ~= 'number' or type(c[2]) ~= 'number' or type(c[3]) ~= 'number' then
    error(('%s: %s must be a table of 3 numbers {r, g, b} in 0..255'):format(fn, what), 3)
  end
  return c
end

local function colour_of(out, color)
  local unit = torch.typename(out) == 'torch.ByteTensor' and 1 or 1 / 255
  return { color[1] * unit, color[2] * unit, color[3] * unit }
end

-- fills rows [y0, y1) x columns [x0, x1) (0-based) of every channel
local function fill(out, x0, y0, x1, y1, colour)
  if x1 <= x0 or y1 <= y0 then return end
  for k = 1, 3 do out[k]:narrow(1, y0 + 1, y1 - y0):narrow(2, x0 + 1, x1 - x0):fill(colour[k]) end
end

-- drawRect(src, x1, y1, x2, y2 [, {color=, lineWidth=, inplace=}]): the outline of the box with
-- corners (x1, y1) and (x2, y2), 1-based pixels, lines lineWidth wide centred on them, clipped.
function image.drawRect(src, x1, y1, x2, y2, opts)
  opts = opts or {}
  local out = target('image.drawRect', src, opts)
  if not (x1 and y1 and x2 and y2) then return out end
  local colour = colour_of(out, rgb('image.drawRect', 'color', opts.color or { 255, 0, 0 }))
  local lw = opts.lineWidth or 1
  local below, above = math.floor(lw / 2) + 1, lw - (math.floor(lw / 2) + 1) - 1
  local h, w = out:size(2), out:size(3)
  local function lo(v) return math.max(0, v - below) end
  local function hi(v, n) return math.min(n, v + above + 1) end
  fill(out, lo(x1), lo(y1), hi(x1, w), hi(y2, h), colour)   -- left
  fill(out, lo(x2), lo(y1), hi(x2, w), hi(y2, h), colour)   -- right
  fill(out, lo(x1), lo(y1), hi(x2, w), hi(y1, h), colour)   -- top
  fill(out, lo(x1), lo(y2), hi(x2, w), hi(y2, h), colour)   -- bottom
  return out
end

-- drawText(src, text [, x, y] [, {color=, bg=, size=, wrap=, inplace=}]): text in a fixed 6 x 11
-- bitmap font (Pillow's built-in one, not torch7's 6 x 8), scaled by the integer size, from pixel
-- column x, row y (0-based, as torch7's); '\n' starts a line, wrap (default on) at the right edge.
function image.drawText(src, text, x, y, opts)
  opts = opts or {}
  local out = target('image.drawText', src, opts)
  if not text or text:gsub('%s*$', '') == '' then return out end
  local bg = opts.bg and rgb('image.drawText', 'bg', opts.bg)
  if bg and (bg[1] == -1 or bg[2] == -1 or bg[3] == -1) then bg = nil end
  local wrap = opts.wrap == nil or opts.wrap
  py.image_text(out, tostring(text), x or 1, y or 1, math.max(1, math.floor(opts.size or 1)),
                rgb('image.drawText', 'color', opts.color or { 255, 0, 0 }), bg, wrap)
  return out
end

-- nbColor x 3 jet colours (blue, cyan, yellow, red), as torch7's image.jetColormap
function image.jetColormap(nbColor)
  local four = torch.range(1, nbColor):mul(4 / nbColor)
  local map = torch.Tensor(nbColor, 3)
  for k, shift in ipairs({ 1.5, 0.5, -0.5 }) do
    local rising, falling = four - shift, -four + (3 + shift)
    map:select(2, k):copy(torch.cmin(rising, falling):clamp(0, 1))
  end
  return map
end

-- nbColor x 3 colours spread around the hue wheel (39 degrees apart, varying saturation)
function image.colormap(nbColor)
  local map = torch.Tensor(nbColor, 3)
  for i = 1, nbColor do
    local hue = math.fmod((i - 1) * 39, 360) / 60
    local sat = math.fmod((i - 1) / 9, 0.7) + 0.3
    local c = sat                                   -- chroma at lightness 0.5
    local x = c * (1 - math.abs(math.fmod(hue, 2) - 1))
    local sector = math.floor(hue) % 6 + 1
    local rgb = ({ { c, x, 0 }, { x, c, 0 }, { 0, c, x }, { 0, x, c }, { x, 0, c }, { c, 0, x } })[sector]
    for k = 1, 3 do map[i][k] = rgb[k] + 0.5 - c / 2 end
  end
  return map
end

-- y2jet([output,] input): an image of levels 1..L (H x W, 1 x H x W or a vector) as 3 x H x W jet colours
function image.y2jet(...)
  local output, input = util.split(...)
  if not torch.isTensor(input) then error('image.y2jet: expected a tensor of levels, got ' .. util.describe(input), 2) end
  if input:dim() == 3 and input:size(1) == 1 then input = input[1] end
  if input:dim() == 1 then input = input:view(1, input:size(1)) end
  if input:dim() ~= 2 then error('image.y2jet: levels must be H x W, 1 x H x W or a vector, got ' .. util.describe(input), 2) end
  local levels = input:long()
  local L = levels:max()
  if levels:min() < 1 then error('image.y2jet: levels start at 1, got ' .. levels:min(), 2) end
  local map = image.jetColormap(L)
  output = output or input.new()
  local colours = map:index(1, levels:view(-1)):t():contiguous():view(3, input:size(1), input:size(2))
  output:resize(3, input:size(1), input:size(2))
  if torch.typename(output) == 'torch.ByteTensor' then colours:mul(255) end
  return util.store(output, colours)
end
