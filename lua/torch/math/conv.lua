-- conv2 conv3 xcorr2 xcorr3 ([res,] x, k [, 'V'|'F']), as torch7: valid or full 2D/3D
-- convolution (kernel flipped) or cross-correlation, of one image with one kernel, of each plane
-- with its own kernel (3D/3D, 4D/4D), or summed over input planes per output plane (3D/4D, 4D/5D).
--
-- Everything runs as one op of the backend, xcorr3: valid 3D cross-correlations of contiguous
-- volumes (a 2D image is a volume of depth 1; backend/cpu/conv.lua). Convolution correlates with
-- the flipped kernel, and full mode correlates a zero-padded input.
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local numel = require('torch.core.apply').numel

local isTensor = torch.isTensor

-- A contiguous copy of t with its last n dims reversed (the convolution kernel).
local function flipped(t, n)
  local nd = #t._sz
  local sz, str, off = {}, {}, t._off
  for d = 1, nd do
    sz[d], str[d] = t._sz[d], t._str[d]
    if d > nd - n then
      off = off + (sz[d] - 1) * str[d]
      str[d] = -str[d]
    end
  end
  return torch._makeTensor(getmetatable(t), t._st, off, sz, str):clone()
end

-- planes x (depth, rows, cols) with pad zeros on both sides of each of the last n dims.
local function padded(x, pads)
  local sz = {}
  for d = 1, 4 do sz[d] = x._sz[d] + 2 * pads[d] end
  local p = x.new():resize(sz):zero()
  local inner = p
  for d = 2, 4 do inner = inner:narrow(d, pads[d] + 1, x._sz[d]) end
  inner:copy(x)
  return p
end

-- The three forms, by input and kernel dims for n spatial dims.
local function form(n, xd, kd)
  if xd == n and kd == n then return 'single' end
  if xd == n + 1 and kd == n + 1 then return 'planes' end
  if xd == n + 1 and kd == n + 2 then return 'sum' end
end

local function defineConv(name, n, flip)
  local function f(...)
    local r, x, k, mode = ...
    if not isTensor(k) then r, x, k, mode = nil, ... end
    check.tensorOf(name, x, 'input')
    check.tensorOf(name, k, 'kernel')
    check.sameType(name, x, k)
    if x._dt.half then check.error(name .. ': not supported for torch.HalfTensor') end
    mode = mode or 'V'
    if mode ~= 'V' and mode ~= 'F' then
      check.error(("%s: type of convolution can be 'V' or 'F', got %s"):format(name, tostring(mode)))
    end
    if numel(x) == 0 or numel(k) == 0 then
      check.error(('%s: empty input (%s) or kernel (%s)'):format(name, check.sizestr(x), check.sizestr(k)))
    end
    local kind = form(n, #x._sz, #k._sz)
    if not kind then
      check.error(('%s: expected %dD input and %dD kernel, %dD and %dD, or %dD and %dD; got %dD and %dD'):format(
        name, n, n, n + 1, n + 1, n + 1, n + 2, #x._sz, #k._sz))
    end
    -- as planes x depth x rows x cols, and kernels x planes x depth x rows x cols
    local xs, ks = { 1, 1, 1, 1 }, { 1, 1, 1, 1, 1 }
    for d = 1, n do
      xs[5 - d] = x._sz[#x._sz + 1 - d]
      ks[6 - d] = k._sz[#k._sz + 1 - d]
    end
    if kind == 'planes' then
      xs[1], ks[1] = x._sz[1], k._sz[1]
      if xs[1] ~= ks[1] then
        check.error(('%s: %d input planes and %d kernel planes'):format(name, xs[1], ks[1]))
      end
    elseif kind == 'sum' then
      xs[1], ks[1], ks[2] = x._sz[1], k._sz[1], k._sz[2]
      if ks[2] ~= xs[1] then
        check.error(('%s: invalid number of input planes, the kernel expects %d and the input has %d'):format(name, ks[2], xs[1]))
      end
    end
    local outSize, pads = {}, { 0, 0, 0, 0 }
    for d = 2, 4 do
      if mode == 'F' then
        outSize[d] = xs[d] + ks[d + 1] - 1
        pads[d] = ks[d + 1] - 1
      else
        outSize[d] = xs[d] - ks[d + 1] + 1
        if outSize[d] < 1 then
          check.error(('%s: input (%s) is smaller than the kernel (%s) in valid mode'):format(
            name, check.sizestr(x), check.sizestr(k)))
        end
      end
    end
    r = r or x.new()
    check.tensorOf(name, r, 'result')
    check.sameType(name, r, x)

    local xcorr = backend.of(r).xcorr3
    local nout = kind == 'single' and 1 or ks[1]
    local vol = x:contiguous():view(xs)
    if mode == 'F' then vol = padded(vol, pads) end
    local kern = (flip and flipped(k, n) or k:contiguous()):view(ks)
    local out = x.new():resize(nout, outSize[2], outSize[3], outSize[4]):zero()
    xcorr(out, vol, kern, kind)

    local shape = {}
    if kind ~= 'single' then shape[1] = nout end
    for d = 5 - n, 4 do shape[#shape + 1] = outSize[d] end
    return r:resize(shape):copy(out:view(shape))
  end
  torch._method(name, f)
  torch[name] = f
end

defineConv('conv2', 2, true)
defineConv('xcorr2', 2, false)
defineConv('conv3', 3, true)
defineConv('xcorr3', 3, false)
