-- Geometry: scale, crop, translate, rotate, hflip, vflip, flip, with torch7's argument forms. Scale
-- and rotate resample in luabridge/image_ops.py; the rest is narrow/index/copy on the tensors.
local util = require 'image.util'
local py = rawget(_G, '__luabridge_py')

local function plane_size(t)   -- width, height of an H x W or C x H x W image
  return t:size(t:dim()), t:size(t:dim() - 1)
end

-- A destination size from torch7's size strings: 'WxH', 'MAX' (longer side), '^MIN' (shorter side),
-- '*SCn/SCd' or '*SC' (factor); a number is MAX.
local function parse_size(src, size)
  local iw, ih = plane_size(src)
  local longest = tonumber(size)
  if longest then return iw * longest / math.max(iw, ih), ih * longest / math.max(iw, ih) end
  local w, h = size:match('^(%d+)x(%d+)$')
  if w then return tonumber(w), tonumber(h) end
  local shortest = tonumber(size:match('^%^(%d+)$') or '')
  if shortest then return iw * shortest / math.min(iw, ih), ih * shortest / math.min(iw, ih) end
  local num, den = size:match('^%*(%d+)/(%d+)$')
  if num then return iw * num / den, ih * num / den end
  local factor = tonumber(size:match('^%*(.+)$') or '')
  if factor then return iw * factor, ih * factor end
  error(("image.scale: could not find valid dest size in '%s' (use 'WxH', 'MAX', '^MIN', '*SC' or '*SCn/SCd')")
        :format(size), 3)
end

local MODES = { bilinear = true, bicubic = true, simple = true }

-- scale(src, width, height [, mode]), scale(src, size [, mode]), scale(dst, src [, mode])
function image.scale(...)
  local n, a = select('#', ...), { ... }
  local dst, src, width, height, mode
  if torch.isTensor(a[1]) and torch.isTensor(a[2]) then
    dst, src, mode = a[1], a[2], a[3]
  elseif type(a[2]) == 'number' and type(a[3]) == 'number' then
    src, width, height, mode = a[1], a[2], a[3], a[4]
  elseif (type(a[2]) == 'string' or type(a[2]) == 'number') and n <= 3 then
    src, mode = a[1], a[3]
    util.image('image.scale', src, 'input')
    width, height = parse_size(src, a[2])
  else
    error('image.scale: expected (src, width, height [, mode]), (src, size [, mode]) or (dst, src [, mode])', 2)
  end
  util.image('image.scale', src, 'input')
  mode = mode or 'bilinear'
  if not MODES[mode] then error('image.scale: mode must be one of: simple | bicubic | bilinear', 2) end
  if dst then
    util.destination('image.scale', dst, src)
    util.image('image.scale', dst, 'destination')
    if dst:dim() ~= src:dim() or (dst:dim() == 3 and dst:size(1) ~= src:size(1)) then
      error(('image.scale: src and dst depths do not match (%s and %s)'):format(util.describe(src), util.describe(dst)), 2)
    end
  else
    width, height = math.max(math.floor(width), 1), math.max(math.floor(height), 1)
    dst = src:dim() == 3 and src.new(src:size(1), height, width) or src.new(height, width)
  end
  py.image_scale(src, dst, mode)
  return dst
end

local function crop_region(src, x1, y1, x2, y2)
  local iw, ih = plane_size(src)
  x1, y1, x2, y2 = math.floor(x1), math.floor(y1), math.floor(x2), math.floor(y2)
  if x1 < 0 or y1 < 0 or x2 > iw or y2 > ih or x2 <= x1 or y2 <= y1 then
    error(('image.crop: crop (%d, %d) to (%d, %d) goes outside bounds of src (%dx%d)')
          :format(x1, y1, x2, y2, iw, ih), 3)
  end
  local d = src:dim()
  return src:narrow(d - 1, y1 + 1, y2 - y1):narrow(d, x1 + 1, x2 - x1)
end

local ANCHORS = {   -- the top-left corner of a w x h crop of an iw x ih image
  c = function(iw, ih, w, h) return math.floor((iw - w) / 2), math.floor((ih - h) / 2) end,
  tl = function() return 0, 0 end,
  tr = function(iw, _, w) return iw - w, 0 end,
  bl = function(_, ih, _, h) return 0, ih - h end,
  br = function(iw, ih, w, h) return iw - w, ih - h end,
}

-- crop([dst,] src, x1, y1 [, x2, y2]) and crop([dst,] src, format, width, height): corners are
-- 0-based, x2/y2 exclusive; without an end point the destination's size sets the crop's.
function image.crop(...)
  local dst, src, a, b, c, d = util.split(...)
  util.image('image.crop', src, 'input')
  if dst then util.destination('image.crop', dst, src) end
  if type(a) == 'string' then
    if not ANCHORS[a] then error('image.crop: crop format must be "c"|"tl"|"tr"|"bl"|"br"', 2) end
    util.number('image.crop', b, 'width')
    util.number('image.crop', c, 'height')
    local iw, ih = plane_size(src)
    local x1, y1 = ANCHORS[a](iw, ih, b, c)
    a, b, c, d = x1, y1, x1 + b, y1 + c
  end
  util.number('image.crop', a, 'start x')
  util.number('image.crop', b, 'start y')
  if c == nil then
    if not dst then error('image.crop: give the end point (x2, y2) or a destination tensor', 2) end
    local dw, dh = plane_size(dst)
    return dst:copy(crop_region(src, a, b, a + dw, b + dh))
  end
  util.number('image.crop', c, 'end x')
  util.number('image.crop', d, 'end y')
  local region = crop_region(src, a, b, c, d):clone()
  if dst then return image.scale(dst, region) end
  return region
end

-- translate([dst,] src, x, y): shifted by whole pixels; uncovered pixels are 0.
function image.translate(...)
  local dst, src, x, y = util.split(...)
  util.image('image.translate', src, 'input')
  util.number('image.translate', x, 'horizontal translation')
  util.number('image.translate', y, 'vertical translation')
  dst = util.destination('image.translate', dst, src)
  dst:resizeAs(src):zero()
  local iw, ih = plane_size(src)
  x, y = math.floor(x), math.floor(y)
  local w, h = iw - math.abs(x), ih - math.abs(y)
  if w > 0 and h > 0 then
    local dim = src:dim()
    local from = src:narrow(dim - 1, math.max(-y, 0) + 1, h):narrow(dim, math.max(-x, 0) + 1, w)
    dst:narrow(dim - 1, math.max(y, 0) + 1, h):narrow(dim, math.max(x, 0) + 1, w):copy(from)
  end
  return dst
end

-- rotate([dst,] src, theta [, mode]): turned by theta radians about the centre, same size;
-- mode 'simple' (nearest pixel, the default) or 'bilinear'.
function image.rotate(...)
  local dst, src, theta, mode = util.split(...)
  util.image('image.rotate', src, 'input')
  util.number('image.rotate', theta, 'theta')
  mode = mode or 'simple'
  if mode ~= 'simple' and mode ~= 'bilinear' then error('image.rotate: mode must be one of: simple | bilinear', 2) end
  dst = util.destination('image.rotate', dst, src)
  if dst == src or (dst:storage() and dst:storage() == src:storage()) then
    error('image.rotate: in-place rotate not supported', 2)
  end
  dst:resizeAs(src)
  py.image_rotate(src, dst, theta, mode == 'bilinear')
  return dst
end

-- flip([dst,] src, dim): src reversed along dim (dst may be src).
local function flip(fn, dst, src, dim)
  util.image(fn, src, 'input', { [1] = true, [2] = true, [3] = true, [4] = true, [5] = true })
  if type(dim) ~= 'number' or dim < 1 or dim > src:dim() then
    error(('%s: flip dimension %s out of range for %s'):format(fn, tostring(dim), util.describe(src)), 3)
  end
  dst = util.destination(fn, dst, src)
  local n = src:size(dim)
  local reversed = src:index(dim, torch.range(n, 1, -1):long())
  return dst:resizeAs(src):copy(reversed)
end

function image.hflip(...)
  local dst, src = util.split(...)
  return flip('image.hflip', dst, src, torch.isTensor(src) and src:dim() or 0)
end

function image.vflip(...)
  local dst, src = util.split(...)
  return flip('image.vflip', dst, src, torch.isTensor(src) and src:dim() - 1 or 0)
end

function image.flip(...)
  local dst, src, dim = util.split(...)
  return flip('image.flip', dst, src, dim)
end

local WARP_MODES = { simple = true, bilinear = true, bicubic = true, lanczos = true }

-- the warp options after the field: mode, offset mode (and a translation for affinetransform),
-- clamp mode, pad value; checked once for both callers
local function warp_options(fn, mode, offset, clamp, pad_value)
  mode, clamp = mode or 'bilinear', clamp or 'clamp'
  if not WARP_MODES[mode] then error(fn .. ': mode must be one of: lanczos | bicubic | bilinear | simple', 3) end
  if clamp ~= 'clamp' and clamp ~= 'pad' then error(fn .. ': clamp mode must be clamp or pad', 3) end
  if pad_value ~= nil and clamp ~= 'pad' then error(fn .. ': pad_value can only be specified if clamp_mode = "pad"', 3) end
  if offset == nil then offset = true end
  return mode, offset, clamp == 'pad', pad_value or 0
end

-- dst (C x fh x fw) = src sampled along field (2 x fh x fw: row then column offsets, or positions
-- when offset is false); 2D images are warped as one plane
local function run_warp(fn, dst, src, field, mode, offset, pad, pad_value)
  util.image(fn, src, 'input')
  if not (torch.isTensor(field) and field:dim() == 3 and field:size(1) == 2) then
    error(fn .. ': field must be a 2 x H x W tensor of (y, x) offsets, got ' .. util.describe(field), 3)
  end
  local flat = src:dim() == 2
  if flat then src = src:view(1, src:size(1), src:size(2)) end
  dst = util.destination(fn, dst, src)
  dst:resize(src:size(1), field:size(2), field:size(3))
  py.image_warp(src, dst, torch.DoubleTensor(field:size()):copy(field), mode, offset, pad, pad_value)
  return flat and dst[1] or dst
end

-- warp([dst,] src, field [, mode [, offset_mode [, clamp_mode [, pad_value]]]]), as torch7's:
-- mode 'bilinear' (default), 'simple', 'bicubic' or 'lanczos'; clamp_mode 'clamp' or 'pad'
function image.warp(...)
  local dst, src, field, mode, offset, clamp, pad_value = util.split(...)
  if dst and not torch.isTensor(field) then   -- (src, field, ...): two tensors, not dst and src
    dst, src, field, mode, offset, clamp, pad_value = nil, dst, src, field, mode, offset, clamp
  end
  local m, o, pad, value = warp_options('image.warp', mode, offset, clamp, pad_value)
  return run_warp('image.warp', dst, src, field, m, o, pad, value)
end

-- affinetransform([dst,] src, matrix [, mode [, translation [, clamp_mode [, pad_value]]]]): each
-- output pixel p samples centre + matrix * (p - centre) - translation, in (y, x) order
function image.affinetransform(...)
  local dst, src, matrix, mode, translation, clamp, pad_value = util.split(...)
  if dst and not torch.isTensor(matrix) then
    dst, src, matrix, mode, translation, clamp, pad_value = nil, dst, src, matrix, mode, translation, clamp
  end
  util.image('image.affinetransform', src, 'input')
  if not (torch.isTensor(matrix) and matrix:dim() == 2 and matrix:size(1) == 2 and matrix:size(2) == 2) then
    error('image.affinetransform: matrix must be a 2 x 2 tensor, got ' .. util.describe(matrix), 2)
  end
  local m, _, pad, value = warp_options('image.affinetransform', mode, true, clamp, pad_value)
  local d = src:dim()
  local h, w = src:size(d - 1), src:size(d)
  local dy = torch.range(0, h - 1):add(-(h - 1) / 2):view(h, 1):expand(h, w)
  local dx = torch.range(0, w - 1):add(-(w - 1) / 2):view(1, w):expand(h, w)
  local a = matrix:double()
  local t = torch.DoubleTensor(translation or { 0, 0 })
  local field = torch.DoubleTensor(2, h, w)
  -- the offset from p to the sampled point: (matrix - I) * (p - centre) - translation
  field[1]:copy(dy * (a[1][1] - 1) + dx * a[1][2]):add(-t[1])
  field[2]:copy(dy * a[2][1] + dx * (a[2][2] - 1)):add(-t[2])
  return run_warp('image.affinetransform', dst, src, field, m, true, pad, value)
end
