-- graphicsmagick.Image: clementfarabet/graphicsmagick's image object, its pixels kept on the
-- Python side (luabridge/magick.py, on Pillow). Methods return self so calls chain, as there.
require 'torch'

local py = rawget(_G, '__luabridge_py')

local Image = { name = 'magick.Image', path = '<>' }
Image.__index = Image
setmetatable(Image, { __call = function(self, ...) return self.new(...) end })

-- raises the Python side's (nil, message) as this package's error for what was being done
local function check(self, context, ok, message)
  if ok == nil then error(('%s: %s: %s'):format(Image.name, context, tostring(message)), 3) end
  return ok
end

-- The numbers of collected images, freed on the Python side at the next image made: a
-- finalizer never calls Python (it may run while the process shuts down), as torch.memory's.
local collected = {}

-- the image number, queued for freeing when the Lua image is collected
local function hold(self, number)
  if #collected > 0 then
    py.gm_free(table.concat(collected, ','))
    collected = {}
  end
  self.number = number
  self.freer = newproxy(true)
  getmetatable(self.freer).__gc = function() collected[#collected + 1] = number end
  return self
end

local function number(self)
  if not self.number then error(Image.name .. ': the image is empty (load a file, a blob or a tensor first)', 3) end
  return self.number
end

function Image.new(pathOrTensor, ...)
  local image = setmetatable({}, Image)
  if type(pathOrTensor) == 'string' then
    image:load(pathOrTensor, ...)
  elseif torch.isTensor(pathOrTensor) then
    image:fromTensor(pathOrTensor, ...)
  end
  return image
end

function Image:clone()
  return hold(setmetatable({ path = self.path }, Image), py.gm_clone(number(self)))
end

-- width and height are a hint to decode smaller images faster; the image is still read whole
function Image:load(path, width, height)
  if type(path) ~= 'string' then error(Image.name .. ': load expects a file name, got ' .. type(path), 2) end
  local limit = require('graphicsmagick').maxPixels
  hold(self, check(self, 'error loading image ' .. path, py.gm_read(path, limit)))
  self.path = path
  return self
end

function Image:save(path, quality)
  check(self, 'error saving image ' .. tostring(path), py.gm_write(number(self), path, quality or 85))
  return self
end

-- size(): width, height; size(w, h[, filter[, blur]]): resize; size(box): fit in box x box;
-- size(nil, box): cover box x box
function Image:size(width, height, filter, blur)
  local w, h = py.gm_size(number(self))
  if not width and not height then return w, h end
  if not height then
    if w > h then width, height = width, width * h / w else width, height = width * w / h, width end
  elseif not width then
    if w < h then width, height = height, height * h / w else width, height = height * w / h, height end
  end
  check(self, 'error resizing image', py.gm_resize(self.number, width, height, filter or 'Undefined', blur or 1.0))
  return self
end

local function edit(self, what, ...)
  check(self, what, py.gm_edit(number(self), what, ...))
  return self
end

function Image:flip() return edit(self, 'flip') end
function Image:flop() return edit(self, 'flop') end
function Image:negate() return edit(self, 'negate') end
function Image:rotate(deg, r, g, b) return edit(self, 'rotate', deg, r or 0, g or 0, b or 0) end
function Image:crop(w, h, x, y) return edit(self, 'crop', w, h, x or 0, y or 0) end
function Image:addBorder(w, h, r, g, b) return edit(self, 'border', w, h, r or 0, g or 0, b or 0) end
function Image:blur(radius, sigma) return edit(self, 'blur', radius or 0, sigma or 1) end
-- gamma(): the gamma the file declared (0 if none); gamma(g) declares g (saved in a PNG's gAMA)
function Image:gamma(gamma)
  if gamma then py.gm_property(number(self), 'gamma', gamma) return self end
  return py.gm_property(number(self), 'gamma')
end
-- pixels raised to 1/gamma, in one channel ('Red', 'Green', 'Blue') or all
function Image:gammaCorrection(gamma, channel) return edit(self, 'gamma', gamma, channel) end
function Image:sharpen(radius, sigma) return edit(self, 'unsharp', sigma or 1, 1, 0) end
-- amount is a multiple of the detail added back, threshold a fraction of the full range
function Image:unsharpMask(radius, sigma, amount, threshold)
  return edit(self, 'unsharp', sigma or 1, amount or 1, threshold or 0)
end

-- an embedded profile's bytes ('ICM' or 'ICC'), stored with profile(name, bytes): kept and
-- written with the image; the pixels are not converted between profiles
function Image:profile(name, profile)
  if profile then
    check(self, 'error profile image', py.gm_profile(number(self), name, 'set', profile))
    return self
  end
  return py.gm_profile(number(self), name, 'get')
end

function Image:removeProfile(name)
  check(self, 'error profile image', py.gm_profile(number(self), name or '*', 'remove'))
  return self
end

-- JPEG chroma subsampling: {2, 1, 1} (4:2:0) or {1, 1, 1} (4:4:4), used when saving a JPEG
function Image:samplingFactors(factors)
  if factors then py.gm_property(number(self), 'sampling', factors) return self end
  return py.gm_property(number(self), 'sampling')
end

function Image:depth(depth)
  if depth then py.gm_property(number(self), 'depth', depth) return self end
  return py.gm_property(number(self), 'depth')
end

function Image:format(format)
  if format then py.gm_property(number(self), 'format', format) return self end
  return py.gm_property(number(self), 'format')
end

-- get: 'Grayscale', 'GrayscaleMatte', 'TrueColor' or 'TrueColorMatte'; set: those two kinds
function Image:type(imageType)
  if imageType then
    if imageType:find('^Grayscale') then edit(self, 'grey') end
    if imageType:find('Matte$') then edit(self, 'matte') end
    return self
  end
  local grey, matte = py.gm_property(number(self), 'grey'), py.gm_property(number(self), 'matte')
  return (grey and 'Grayscale' or 'TrueColor') .. (matte and 'Matte' or '')
end

function Image:colorspace(colorspace)
  if colorspace then
    if colorspace == 'GRAY' then return edit(self, 'grey') end
    if colorspace == 'RGB' or colorspace == 'sRGB' then return self end
    error(Image.name .. ': colorspace ' .. tostring(colorspace) .. ' is not supported (GRAY, RGB and sRGB are)', 2)
  end
  return py.gm_property(number(self), 'grey') and 'GRAY' or 'RGB'
end

function Image:toBlob(quality)
  local data = check(self, 'error writing blob', py.gm_encode(number(self), nil, quality))
  return data, #data
end

function Image:toString(quality)
  return (self:toBlob(quality))
end

function Image:fromBlob(blob, size)
  if type(blob) ~= 'string' then error(Image.name .. ': fromBlob expects the bytes as a Lua string', 2) end
  if size and size < #blob then blob = blob:sub(1, size) end
  local limit = require('graphicsmagick').maxPixels
  local bytes = torch.ByteTensor(torch.ByteStorage():string(blob))
  hold(self, check(self, 'error reading from blob', py.gm_read(bytes, limit)))
  self.path = '<blob>'
  return self
end

function Image:fromString(s)
  return self:fromBlob(s, #s)
end

local TENSOR = { byte = 'ByteTensor', float = 'FloatTensor', double = 'DoubleTensor' }

-- dataType 'byte' (0..255), 'float' or 'double' ([0, 1]); colorspace any string of R, G, B,
-- A, I (intensity), C, M, Y, K; dims 'HWD' (default) or 'DHW'
function Image:toTensor(dataType, colorspace, dims)
  dataType, colorspace, dims = dataType or 'byte', colorspace or 'RGB', dims or 'HWD'
  if not TENSOR[dataType] then error(Image.name .. ': unknown data type ' .. tostring(dataType), 2) end
  if dims ~= 'HWD' and dims ~= 'DHW' then error(Image.name .. ": dims must be 'HWD' or 'DHW', got " .. tostring(dims), 2) end
  local w, h = py.gm_size(number(self))
  local out = dims == 'DHW' and torch[TENSOR[dataType]](#colorspace, h, w) or torch[TENSOR[dataType]](h, w, #colorspace)
  check(self, 'toTensor', py.gm_to_tensor(self.number, colorspace, dims, out))
  return out
end

function Image:fromTensor(tensor, colorspace, dims)
  if not torch.isTensor(tensor) or tensor:dim() ~= 3 then
    error(Image.name .. ': fromTensor expects a 3-D tensor (DHW or HWD)', 2)
  end
  local kind = torch.typename(tensor)
  if kind ~= 'torch.FloatTensor' and kind ~= 'torch.DoubleTensor' and kind ~= 'torch.ByteTensor' then
    error(Image.name .. ': only dealing with float, double and byte', 2)
  end
  dims = dims or 'HWD'
  local depth = dims == 'DHW' and tensor:size(1) or tensor:size(3)
  colorspace = colorspace or ({ 'I', nil, 'RGB', 'RGBA' })[depth]
  if not colorspace or #colorspace ~= depth then
    error(Image.name .. '.fromTensor: Tensor depth must match color space', 2)
  end
  hold(self, check(self, 'fromTensor', py.gm_from_tensor(tensor, colorspace, dims)))
  self.path = '<tensor>'
  return self
end

function Image:show(zoom)
  require 'image'
  image.display({ image = self:toTensor('float', 'RGB', 'DHW'), zoom = zoom })
  return self
end

function Image:info()
  local w, h = py.gm_size(number(self))
  return ('%s %s %dx%d %d-bit %s'):format(self.path, self:format(), w, h, self:depth(), self:type())
end

return Image
