-- image.polar and image.logpolar: an image resampled on a polar (or log-polar) grid, as torch/image's
-- Main_polar, Main_polarBilinear, Main_logPolar and Main_logPolarBilinear. Destination column i is
-- the radius, row j the angle 2*pi*j/H; the source is read at row floor(r cos a + H/2), column
-- floor(-r sin a + W/2), 0 outside. The C code keeps the angle, radius and centre in floats: they are
-- rounded to float32 here the same way, so the same pixels are picked.
local util = require 'image.util'

local function f32(x)   -- a number rounded to float32, as the C stored it in a float
  return torch.FloatTensor(1):fill(x)[1]
end

-- torch7's argument forms: (src), (src, interp [, mode]), (dst, src [, interp [, mode]]).
local function arguments(fn, ...)
  local n, a = select('#', ...), { ... }
  local dst, src, interp, mode
  if n == 4 then
    dst, src, interp, mode = a[1], a[2], a[3], a[4]
  elseif n == 3 then
    if type(a[2]) == 'string' then src, interp, mode = a[1], a[2], a[3] else dst, src, interp = a[1], a[2], a[3] end
  elseif n == 2 then
    if type(a[2]) == 'string' then src, interp = a[1], a[2] else dst, src = a[1], a[2] end
  elseif n == 1 then
    src = a[1]
  else
    error(('<%s> incorrect arguments: expecting ([dst,] src [, interpolation [, mode]])'):format(fn), 3)
  end
  util.image(fn, src, 'src', nil, 4)
  -- torch7 defaults interp to 'valid' and mode to 'simple' (swapped): (src) alone is refused below
  interp, mode = interp or 'valid', mode or 'simple'
  if interp ~= 'simple' and interp ~= 'bilinear' then
    error(('<%s> interpolation must be one of: simple | bilinear'):format(fn), 3)
  end
  if mode ~= 'valid' and mode ~= 'full' then
    error(('<%s> mode must be one of: valid | full'):format(fn), 3)
  end
  if dst == nil then
    if src:dim() ~= 3 then
      error(('%s: without a destination the source must be C x H x W (torch7 sizes it from src:size(3)), got %s')
            :format(fn, util.describe(src)), 3)
    end
    local maxDist = math.max(src:size(2), src:size(3))
    dst = src.new():resize(src:size(1), maxDist, maxDist)
  else
    util.destination(fn, dst, src)
    util.image(fn, dst, 'dst', nil, 4)
  end
  if dst:dim() ~= src:dim() or (src:dim() == 3 and dst:size(1) ~= src:size(1)) then
    error(('image.polar: src and dst depths do not match (%s, %s)')   -- torch7's text for both
          :format(util.describe(src), util.describe(dst)), 3)
  end
  return dst, src, interp, mode == 'full'
end

-- The source's row and column coordinates (H x W doubles) of each destination pixel.
local function grid(src, dst, full, logarithmic)
  local sh, sw = src:size(src:dim() - 1), src:size(src:dim())
  local h, w = dst:size(dst:dim() - 1), dst:size(dst:dim())
  local midY, midX = f32(sh / 2), f32(sw / 2)
  local m
  if full then m = f32(math.sqrt(sw * sw + sh * sh) / 2) else m = sw < sh and midX or midY end
  local angle = torch.range(0, h - 1):mul(2 * math.pi):div(h):float():double()
  local ids = torch.range(0, w - 1):float()
  local radius
  if logarithmic then
    local fw = f32(math.log(m) / w)
    radius = torch.exp(ids:mul(fw):double()):float():double()
  else
    radius = ids:mul(m):div(w):double()
  end
  local rows = torch.ger(torch.cos(angle), radius):add(midY)
  local cols = torch.ger(torch.sin(angle), radius):mul(-1):add(midX)
  return rows, cols, sh, sw
end

-- plane (sh x sw doubles) read at integer rows/cols, 0 where `inside` is 0.
local function gather(plane, rows, cols, inside, sw)
  local idx = rows:clone():cmul(inside):mul(sw):add(cols:clone():cmul(inside)):add(1):long():view(-1)
  return plane:contiguous():view(-1):index(1, idx):viewAs(rows):cmul(inside)
end

local function between(t, lo, hi)   -- 1 where lo <= t <= hi, else 0 (doubles)
  return t:ge(lo):double():cmul(t:le(hi):double())
end

local function resample(src, dst, rows, cols, sh, sw, bilinear)
  local r0, c0 = torch.floor(rows), torch.floor(cols)
  local inside = between(r0, 0, sh - 1):cmul(between(c0, 0, sw - 1))
  local planes = src:dim() == 3 and src:size(1) or 1
  local out = torch.DoubleTensor(planes, rows:size(1), rows:size(2))
  local inner, wr, wc
  if bilinear then
    inner = between(r0, 0, sh - 2):cmul(between(c0, 0, sw - 2))
    wr, wc = rows - r0, cols - c0
  end
  for k = 1, planes do
    local plane = (src:dim() == 3 and src[k] or src):double()
    local near = gather(plane, r0, c0, inside, sw)
    if bilinear then
      local r1, c1 = r0 + 1, c0 + 1
      local v = gather(plane, r0, c0, inner, sw):cmul((1 - wc):cmul(1 - wr))
         + gather(plane, r0, c1, inner, sw):cmul(wc:clone():cmul(1 - wr))
         + gather(plane, r1, c0, inner, sw):cmul((1 - wc):cmul(wr))
         + gather(plane, r1, c1, inner, sw):cmul(wc:clone():cmul(wr))
      near = near:cmul(1 - inner) + v
    end
    out[k]:copy(near)
  end
  return util.store(dst, src:dim() == 3 and out or out[1])
end

local function transform(fn, logarithmic, ...)
  local dst, src, interp, full = arguments(fn, ...)
  local rows, cols, sh, sw = grid(src, dst, full, logarithmic)
  if logarithmic and interp == 'bilinear' then   -- Main_logPolarBilinear keeps ri, rj in floats
    rows, cols = rows:float():double(), cols:float():double()
  end
  resample(src, dst, rows, cols, sh, sw, interp == 'bilinear')
  return dst
end

-- polar([dst,] src [, 'simple' | 'bilinear' [, 'valid' | 'full']])
function image.polar(...) return transform('image.polar', false, ...) end

-- logpolar([dst,] src [, 'simple' | 'bilinear' [, 'valid' | 'full']]): the radius grows as exp(i log(m) / W)
function image.logpolar(...) return transform('image.logpolar', true, ...) end

return image
