-- Argument checks shared by the image functions: which tensors the kernels take, and torch7's
-- optional-destination calling forms.
local util = {}

local KERNEL_TYPES = { ['torch.ByteTensor'] = true, ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true }

local function describe(t)
  if not torch.isTensor(t) then return type(t) end
  local dims = t:dim() > 0 and table.concat(t:size():totable(), 'x') or 'empty'
  return ('%s of size %s'):format(torch.typename(t), dims)
end
util.describe = describe

-- t must be an H x W or C x H x W Byte, Float or Double tensor (dims: the dimensions allowed).
-- The error names the public function's caller; level: for a check made deeper than there.
function util.image(fn, t, what, dims, level)
  dims = dims or { [2] = true, [3] = true }
  if not (torch.isTensor(t) and KERNEL_TYPES[torch.typename(t)] and dims[t:dim()]) then
    local want = {}
    for d in pairs(dims) do want[#want + 1] = d .. 'D' end
    table.sort(want)
    error(('%s: %s must be a %s Byte, Float or Double tensor, got %s')
          :format(fn, what or 'image', table.concat(want, ' or '), describe(t)), level or 3)
  end
  if t:nElement() == 0 then error(('%s: %s is empty'):format(fn, what or 'image'), level or 3) end
  return t
end

-- An RGB-like image: 3 x H x W (a destination of the same type is reused).
function util.color(fn, t)
  util.image(fn, t, 'input', { [3] = true })
  if t:size(1) < 3 then error(('%s: input needs 3 channels, got %s'):format(fn, describe(t)), 3) end
  return t
end

-- dst given by the caller has src's type.
function util.destination(fn, dst, src)
  if dst == nil then return src.new() end
  if not torch.isTensor(dst) or torch.typename(dst) ~= torch.typename(src) then
    error(('%s: destination must be a %s like the input, got %s'):format(fn, torch.typename(src), describe(dst)), 3)
  end
  return dst
end

-- (dst, src, ...) or (src, ...): the destination (nil when absent), the source, the rest.
function util.split(...)
  local a, b = ...
  if torch.isTensor(a) and torch.isTensor(b) then return a, b, select(3, ...) end
  return nil, ...
end

function util.number(fn, v, what)
  if type(v) ~= 'number' then error(('%s: %s must be a number, got %s'):format(fn, what, type(v)), 3) end
  return v
end

-- values (any tensor, computed in doubles) stored into dst; a byte dst rounds and clamps as torch7.
function util.store(dst, values)
  if torch.typename(dst) == 'torch.ByteTensor' then
    values = values:clone():add(0.5):floor():clamp(0, 255)
  end
  return dst:copy(values)
end

return util
