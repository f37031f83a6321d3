-- Filter kernels (gaussian, gaussian1D, laplacian) with torch7's named or positional arguments,
-- and convolve over torch.conv2.
local util = require 'image.util'
local unpack = unpack or table.unpack

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
  local gauss = tensor or torch.Tensor(size)
  local values = bell(size, mean, sigma, amplitude)
  if normalize then values:div(values:sum()) end
  return util.store(gauss, values)
end

function image.laplacian(...)
  local _, size, sigma, amplitude, normalize, width, height, sigma_horz, sigma_vert, mean_horz, mean_vert =
    dok.unpack({ ... }, 'image.laplacian', 'returns a 2D Laplacian kernel', unpack(kernel_args(0.1)))
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
  if not (torch.isTensor(src) and torch.isTensor(kernel)) then
    error('image.convolve: expected ([dst,] src, kernel [, mode]) with tensors, got ' ..
          util.describe(src) .. ' and ' .. util.describe(kernel), 2)
  end
  mode = mode or 'valid'
  if not CONV_MODES[mode] then error('image.convolve: mode has to be one of: full | valid | same', 2) end
  if kernel:dim() == 2 and src:dim() == 3 then
    kernel = kernel:view(1, kernel:size(1), kernel:size(2)):expand(src:size(1), kernel:size(1), kernel:size(2))
    kernel = kernel:typeAs(src):contiguous()
  end
  if dst then torch.conv2(dst, src, kernel, CONV_MODES[mode]) else dst = torch.conv2(src, kernel, CONV_MODES[mode]) end
  if mode == 'same' then
    local cx = dst:dim()
    local cy = cx - 1
    dst = dst:narrow(cy, math.ceil(kernel:size(cy) / 2), src:size(cy)):narrow(cx, math.ceil(kernel:size(cx) / 2), src:size(cx))
  end
  return dst
end
