-- Filter kernels (gaussian, gaussian1D, laplacian) with torch7's named or positional arguments,
-- convolve over torch.conv2, and what is built on them: gaussianpyramid, lcn, erode, dilate.
local util = require 'image.util'
local unpack = unpack or table.unpack

-- a kernel's width or height, checked by the public function: a whole number from 1 on
local function extent(fn, n, what)
  if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
    error(('%s: %s must be a whole number from 1 on, got %s'):format(fn, what, tostring(n)), 3)
  end
  return n
end

-- amplitude * exp(-((u - mean_u) / (sigma_u * width))^2 / 2) over 1-based positions u
local function bell(n, mean, sigma, amplitude)
  local centre = mean * n + 0.5
  return torch.range(1, n):add(-centre):div(sigma * n):pow(2):mul(-0.5):exp():mul(amplitude)
end

-- the arguments of the 2D kernels (sigma's default differs), then any extra ones
local function kernel_args(sigma, extra)
  local defs = {
    { arg = 'size', type = 'number', help = 'kernel size (size x size)', default = 3 },
    { arg = 'sigma', type = 'number', help = 'sigma (horizontal and vertical)', default = sigma },
    { arg = 'amplitude', type = 'number', help = 'amplitude (max value)', default = 1 },
    { arg = 'normalize', type = 'number', help = 'normalize kernel (exc Amplitude)', default = false },
    { arg = 'width', type = 'number', help = 'kernel width', defaulta = 'size' },
    { arg = 'height', type = 'number', help = 'kernel height', defaulta = 'size' },
    { arg = 'sigma_horz', type = 'number', help = 'horizontal sigma', defaulta = 'sigma' },
    { arg = 'sigma_vert', type = 'number', help = 'vertical sigma', defaulta = 'sigma' },
    { arg = 'mean_horz', type = 'number', help = 'horizontal mean', default = 0.5 },
    { arg = 'mean_vert', type = 'number', help = 'vertical mean', default = 0.5 },
  }
  for _, d in ipairs(extra or {}) do defs[#defs + 1] = d end
  return defs
end

function image.gaussian(...)
  local _, size, sigma, amplitude, normalize, width, height, sigma_horz, sigma_vert, mean_horz, mean_vert, tensor =
    dok.unpack({ ... }, 'image.gaussian', 'returns a 2D gaussian kernel', unpack(kernel_args(0.25, {
      { arg = 'tensor', type = 'torch.Tensor', help = 'result tensor (height/width are ignored)' } })))
  if tensor then
    util.image('image.gaussian', tensor, 'tensor', { [2] = true })
    height, width = tensor:size(1), tensor:size(2)
  end
  extent('image.gaussian', height, 'height'); extent('image.gaussian', width, 'width')
  local gauss = tensor or torch.Tensor(height, width)
  -- the 2D gaussian is the outer product of the vertical and horizontal bells
  local values = torch.ger(bell(height, mean_vert, sigma_vert, 1), bell(width, mean_horz, sigma_horz, amplitude))
  util.store(gauss, values)
  if normalize then
    -- torch7 sums the stored values (rounded bytes for a byte kernel) and scales them in place
    local scaled = torch.div(gauss:double(), gauss:double():sum())
    if torch.typename(gauss) == 'torch.ByteTensor' then scaled:floor() end
    gauss:copy(scaled)
  end
  return gauss
end

function image.gaussian1D(...)
  local _, size, sigma, amplitude, normalize, mean, tensor =
    dok.unpack({ ... }, 'image.gaussian1D', 'returns a 1D gaussian kernel',
      { arg = 'size', type = 'number', help = 'size the kernel', default = 3 },
      { arg = 'sigma', type = 'number', help = 'Sigma', default = 0.25 },
      { arg = 'amplitude', type = 'number', help = 'Amplitude of the gaussian (max value)', default = 1 },
      { arg = 'normalize', type = 'number', help = 'Normalize kernel (exc Amplitude)', default = false },
      { arg = 'mean', type = 'number', help = 'Mean', default = 0.5 },
      { arg = 'tensor', type = 'torch.Tensor', help = 'result tensor (size is ignored)' })
  if tensor then
    util.image('image.gaussian1D', tensor, 'tensor', { [1] = true })
    size = tensor:size(1)
  end
  extent('image.gaussian1D', size, 'size')
  local gauss = tensor or torch.Tensor(size)
  local values = bell(size, mean, sigma, amplitude)
  if normalize then values:div(values:sum()) end
  return util.store(gauss, values)
end

function image.laplacian(...)
  local _, size, sigma, amplitude, normalize, width, height, sigma_horz, sigma_vert, mean_horz, mean_vert =
    dok.unpack({ ... }, 'image.laplacian', 'returns a 2D Laplacian kernel', unpack(kernel_args(0.1)))
  extent('image.laplacian', width, 'width'); extent('image.laplacian', height, 'height')
  -- torch7 measures rows against the horizontal parameters and columns against the vertical ones
  local rows = torch.range(1, height):add(-(mean_horz * width + 0.5)):div(sigma_horz * width):pow(2):div(2)
  local cols = torch.range(1, width):add(-(mean_vert * height + 0.5)):div(sigma_vert * height):pow(2):div(2)
  local q = torch.ger(rows, torch.ones(width)):add(torch.ger(torch.ones(height), cols))
  local logauss = q:clone():mul(-1):add(1):cmul(q:clone():mul(-1):exp()):mul(amplitude)
  if normalize then logauss:div(logauss:sum()) end
  return logauss
end

local CONV_MODES = { valid = 'V', full = 'F', same = 'F' }

-- convolve([dst,] src, kernel [, mode]): mode 'valid' (default), 'full' or 'same' (the full
-- result's centre, the input's size); a 2D kernel applies to each plane of a 3D image.
function image.convolve(...)
  local n, a = select('#', ...), { ... }
  local dst, src, kernel, mode
  if n == 4 or (n == 3 and type(a[3]) ~= 'string') then
    dst, src, kernel, mode = a[1], a[2], a[3], a[4]
  else
    src, kernel, mode = a[1], a[2], a[3]
  end
  if not (torch.isTensor(src) and torch.isTensor(kernel) and src:dim() >= 2 and src:dim() <= 3
          and kernel:dim() >= 2 and kernel:dim() <= 3) then
    error('image.convolve: expected ([dst,] src, kernel [, mode]) with 2D or 3D tensors, got ' ..
          util.describe(src) .. ' and ' .. util.describe(kernel), 2)
  end
  mode = mode or 'valid'
  if not CONV_MODES[mode] then error('image.convolve: mode has to be one of: full | valid | same', 2) end
  if kernel:dim() == 2 and src:dim() == 3 then
    kernel = kernel:view(1, kernel:size(1), kernel:size(2)):expand(src:size(1), kernel:size(1), kernel:size(2))
    kernel = kernel:typeAs(src):contiguous()
  end
  local sh, sw, kh, kw = src:size(src:dim() - 1), src:size(src:dim()), kernel:size(kernel:dim() - 1), kernel:size(kernel:dim())
  if mode == 'valid' and (sh < kh or sw < kw) then
    error(('image.convolve: input (%dx%d) is smaller than the kernel (%dx%d) in valid mode'):format(sh, sw, kh, kw), 2)
  end
  if dst then torch.conv2(dst, src, kernel, CONV_MODES[mode]) else dst = torch.conv2(src, kernel, CONV_MODES[mode]) end
  if mode == 'same' then
    local cx = dst:dim()
    local cy = cx - 1
    dst = dst:narrow(cy, math.ceil(kernel:size(cy) / 2), src:size(cy)):narrow(cx, math.ceil(kernel:size(cx) / 2), src:size(cx))
  end
  return dst
end

-- gaussianpyramid([dst,] src, scales): for each scale, the previous level (src first) resized
-- ('simple') to src's size times the scale, then smoothed by a normalized 3 x 3 gaussian
function image.gaussianpyramid(...)
  local dst, src, scales = util.split(...)
  if dst == nil then dst = {} end
  if torch.isTensor(dst) then dst, src, scales = {}, dst, src end
  util.image('image.gaussianpyramid', src, 'src')
  if type(scales) ~= 'table' then error('image.gaussianpyramid: scales must be a list of numbers', 2) end
  local d = src:dim()
  for i, s in ipairs(scales) do
    dst[i] = dst[i] or src.new()
    local h, w = math.floor(src:size(d - 1) * s), math.floor(src:size(d) * s)
    if d == 3 then dst[i]:resize(src:size(1), h, w) else dst[i]:resize(h, w) end
  end
  local k = image.gaussian { width = 3, normalize = true }:typeAs(src)
  local previous = src
  for i, s in ipairs(scales) do
    if s == 1 then dst[i]:copy(previous) else image.scale(dst[i], previous, 'simple') end
    previous = image.convolve(dst[i], k, 'same')
  end
  return dst
end

-- lcn(im [, kernel]): local contrast normalization of a grey image (H x W or 1 x H x W): the
-- image standardized, then each pixel minus its local mean over its local std (at least 1), both
-- weighted by kernel (a normalized 9 x 9 gaussian by default); the result is valid-sized, double
function image.lcn(im, ker)
  ker = ker or image.gaussian { size = 9, sigma = 1.591 / 9, normalize = true }
  if not (torch.isTensor(im) and (im:dim() == 2 or (im:dim() == 3 and im:size(1) == 1))) then
    error('image.lcn: grayscale image expected, got ' .. util.describe(im), 2)
  end
  im = torch.DoubleTensor(im:size()):copy(im)
  if im:dim() == 3 then im = im[1] end
  ker = ker:double()
  im:add(-im:mean()):div(im:std())
  local mean = torch.conv2(im, ker)
  local var = torch.conv2(torch.cmul(im, im), ker):add(-1, torch.cmul(mean, mean)):clamp(0, math.huge)
  local std = var:sqrt():clamp(1, math.huge)
  local top, left = math.floor(ker:size(1) / 2) + 1, math.floor(ker:size(2) / 2) + 1
  return im:narrow(1, top, mean:size(1)):narrow(2, left, mean:size(2)):clone():add(-1, mean):cdiv(std)
end

-- binary morphology with an odd-sized kernel of 0/1 (3 x 3 ones by default): counts of the ones
-- under the kernel (mirrored when flip, as torch7's erode convolves), the border taken as pad
local function morphology(fn, im, kern, pad, flip, keep)
  if not (torch.isTensor(im) and im:dim() == 2) then error(fn .. ': a 2D binary image expected, got ' .. util.describe(im), 3) end
  kern = kern or torch.ones(3, 3):typeAs(im)
  if kern:size(1) % 2 == 0 or kern:size(2) % 2 == 0 then
    error(fn .. ': kernel sizes must be odd, got ' .. util.describe(kern), 3)
  end
  local hp, wp = (kern:size(1) - 1) / 2, (kern:size(2) - 1) / 2
  local padded = torch.DoubleTensor(im:size(1) + 2 * hp, im:size(2) + 2 * wp):fill(pad)
  padded:narrow(1, hp + 1, im:size(1)):narrow(2, wp + 1, im:size(2)):copy(im)
  local counts = (flip and torch.conv2 or torch.xcorr2)(padded, kern:double())
  return keep(counts, kern:double():sum()):typeAs(im)
end

-- erode(im [, kern [, pad = 1]]): 1 where every pixel under the mirrored kernel's ones is 1
function image.erode(im, kern, pad)
  return morphology('image.erode', im, kern, pad or 1, true, function(counts, n) return counts:eq(n) end)
end

-- dilate(im [, kern [, pad = 0]]): 1 where any pixel under the kernel's ones is 1
function image.dilate(im, kern, pad)
  return morphology('image.dilate', im, kern, pad or 0, false, function(counts) return counts:gt(0) end)
end
