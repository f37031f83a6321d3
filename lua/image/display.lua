-- Range mapping (minmax), image grids (toDisplayTensor), display without a window (a PNG file),
-- and the test pictures: lena() is a synthetic 3 x 512 x 512 picture made here, not the photo.
local util = require 'image.util'

-- minmax{tensor=, min=, max=, symm=, inplace=, saturate=, tensorOut=}: tensor mapped so that
-- [min, max] (default: its own range; symm: [-m, m] with m its largest magnitude) becomes [0, 1].
function image.minmax(args)
  local tensor = args.tensor
  if not torch.isTensor(tensor) then error('image.minmax: tensor must be a tensor, got ' .. util.describe(tensor), 2) end
  local min, max = args.min, args.max
  local out = args.tensorOut or (args.inplace and tensor) or torch.Tensor(tensor:size()):copy(tensor)
  if args.tensorOut then out:resize(tensor:size()):copy(tensor) end
  local saturate = args.saturate and not (min == nil and max == nil)
  local fmin = 0
  if min == nil then
    if args.symm then
      fmin = math.max(math.abs(out:min()), math.abs(out:max()))
      min = -fmin
    else
      min = out:min()
    end
  end
  if min ~= 0 then out:add(-min) end
  if max == nil then
    max = args.symm and fmin * 2 or out:max()
  else
    max = max - min
  end
  if max ~= 0 then out:div(max) end
  if saturate then out:clamp(0, 1) end
  return out
end

local function is_image(t)
  return t:dim() == 2 or (t:dim() == 3 and (t:size(1) == 1 or t:size(1) == 3))
end

-- toDisplayTensor{input=, padding=, nrow=, scaleeach=, min=, max=, symmetric=, saturate=}: a list or
-- batch of images (K x H x W or K x C x H x W, C = 1 or 3) laid out in a grid of nrow per row.
function image.toDisplayTensor(...)
  local _, input, padding, nrow, scaleeach, min, max, symm, saturate = dok.unpack({ ... },
    'image.toDisplayTensor', 'given a pack of tensors, returns a single tensor that contains a grid of all in the pack',
    { arg = 'input', type = 'torch.Tensor | table', help = 'input (HxW or KxHxW or Kx3xHxW or list)', req = true },
    { arg = 'padding', type = 'number', help = 'number of padding pixels between images', default = 0 },
    { arg = 'nrow', type = 'number', help = 'number of images per row', default = 6 },
    { arg = 'scaleeach', type = 'boolean', help = 'individual scaling for list of images', default = false },
    { arg = 'min', type = 'number', help = 'lower-bound for range' },
    { arg = 'max', type = 'number', help = 'upper-bound for range' },
    { arg = 'symmetric', type = 'boolean', help = 'symmetric dynamic range, useful for drawing filters', default = false },
    { arg = 'saturate', type = 'boolean', help = 'saturate (useful when min/max are lower than actual min/max)', default = true })
  local packed = torch.Tensor()
  if type(input) == 'table' and not torch.isTensor(input) then
    local first = input[1]
    if not torch.isTensor(first) then error('image.toDisplayTensor: the list must hold tensors', 2) end
    local d = first:dim()
    packed:resize(#input, d == 2 and 1 or first:size(1), first:size(d - 1), first:size(d))
    for i, img in ipairs(input) do packed[i]:copy(img) end
  elseif torch.isTensor(input) then
    packed:resize(input:size()):copy(input)
  else
    error('image.toDisplayTensor: unknown or incompatible type of input: ' .. torch.type(input), 2)
  end
  local range = { min = min, max = max, symm = symm, saturate = saturate, inplace = true }
  local function rescale(t) range.tensor = t; image.minmax(range) end
  local batch_of_images = packed:dim() == 4 and (packed:size(2) == 3 or packed:size(2) == 1)
  if scaleeach and (batch_of_images or (packed:dim() == 3 and not is_image(packed))) then
    for i = 1, packed:size(1) do rescale(packed[i]) end
  end
  if is_image(packed) then
    rescale(packed)
    return packed
  end
  if not (batch_of_images or packed:dim() == 3) then
    error('image.toDisplayTensor: input must be a HxW or KxHxW or Kx3xHxW tensor, or a list of tensors, got '
          .. util.describe(packed), 2)
  end
  local d = packed:dim()
  local count = packed:size(1)
  local across = math.min(nrow, count)
  local down = math.ceil(count / across)
  local h, w = packed:size(d - 1) + padding, packed:size(d) + padding
  local grid = batch_of_images and torch.Tensor(packed:size(2), h * down, w * across) or torch.Tensor(h * down, w * across)
  grid:fill(packed:max())
  local gd = grid:dim()
  for k = 1, count do
    local row, col = math.floor((k - 1) / across), (k - 1) % across
    grid:narrow(gd - 1, math.floor(row * h + 1 + padding / 2), h - padding)
        :narrow(gd, math.floor(col * w + 1 + padding / 2), w - padding):copy(packed[k])
  end
  if not scaleeach then rescale(grid) end
  return grid
end

local shown = 0

-- display{image=, zoom=, min=, max=, legend=, ...}: luabridge has no windows, so the grid that
-- torch7 would show is written to image_display_<n>.png in the current folder (n counts the calls
-- of this process); the path is printed and returned.
function image.display(...)
  local _, input, zoom, min, max, legend, _, _, _, scaleeach, _, _, padding, symm, nrow, saturate = dok.unpack({ ... },
    'image.display', 'displays a single image, with optional saturation/zoom',
    { arg = 'image', type = 'torch.Tensor | table', help = 'image (HxW or KxHxW or Kx3xHxW or list)', req = true },
    { arg = 'zoom', type = 'number', help = 'display zoom', default = 1 },
    { arg = 'min', type = 'number', help = 'lower-bound for range' },
    { arg = 'max', type = 'number', help = 'upper-bound for range' },
    { arg = 'legend', type = 'string', help = 'legend', default = 'image.display' },
    { arg = 'win', type = 'qt window', help = 'window descriptor (ignored)' },
    { arg = 'x', type = 'number', help = 'x offset (ignored)', default = 0 },
    { arg = 'y', type = 'number', help = 'y offset (ignored)', default = 0 },
    { arg = 'scaleeach', type = 'boolean', help = 'individual scaling for list of images', default = false },
    { arg = 'gui', type = 'boolean', help = 'ignored', default = true },
    { arg = 'offscreen', type = 'boolean', help = 'ignored', default = false },
    { arg = 'padding', type = 'number', help = 'number of padding pixels between images', default = 0 },
    { arg = 'symmetric', type = 'boolean', help = 'symmetric dynamic range', default = false },
    { arg = 'nrow', type = 'number', help = 'number of images per row', default = 6 },
    { arg = 'saturate', type = 'boolean', help = 'saturate (useful when min/max are lower than actual min/max)', default = true })
  local grid = image.toDisplayTensor { input = input, padding = padding, nrow = nrow, saturate = saturate,
                                       scaleeach = scaleeach, min = min, max = max, symmetric = symm }
  if zoom ~= 1 then
    local d = grid:dim()
    grid = image.scale(grid, math.max(1, math.floor(grid:size(d) * zoom)), math.max(1, math.floor(grid:size(d - 1) * zoom)), 'simple')
  end
  shown = shown + 1
  local path = ('image_display_%d.png'):format(shown)
  image.save(path, grid)
  print(("image.display: no window in luabridge; '%s' saved to %s"):format(legend, path))
  return path
end

-- A synthetic 3 x 512 x 512 test picture in [0, 1] (torch7 loads a photograph): red rises along the
-- diagonal, green has rings about the centre, blue is a checkerboard of 64-pixel squares, and a
-- white disc sits top left; values are multiples of 1/255.
function image.lena()
  local n = 512
  local ramp = torch.range(0, n - 1):div(n - 1)
  local ones = torch.ones(n)
  local x, y = torch.ger(ones, ramp), torch.ger(ramp, ones)
  local pic = torch.Tensor(3, n, n)
  pic[1]:copy(x + y):div(2)
  local r = (x - 0.5):pow(2):add((y - 0.5):pow(2)):sqrt()
  pic[2]:copy(r:clone():mul(2 * math.pi * 6):cos():mul(0.5):add(0.5))
  local cells = torch.floor(x * (n - 1) / 64):add(torch.floor(y * (n - 1) / 64)):remainder(2)
  pic[3]:copy(cells:mul(0.6):add(0.2))
  local disc = (x - 0.25):pow(2):add((y - 0.25):pow(2)):sqrt():lt(0.1)
  for k = 1, 3 do pic[k][disc] = 1 end
  pic:mul(255):round():div(255)   -- 8-bit levels, as a picture read from a file
  return pic:type(torch.getdefaulttensortype())
end

-- torch7's grey test picture (H x W, as a colour file loaded at depth 1): here lena()'s luminance
function image.fabio()
  return image.rgb2y(image.lena())[1]
end
