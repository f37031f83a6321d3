-- image.load / save / getSize and the in-memory compress/decompress forms. The formats are torch7's
-- (PNG, JPEG, PPM, PGM), found from the file's bytes, else its extension. Decoded pixels land
-- directly in the result tensor; 16-bit PNG/PGM samples give [0, 1] floats (bytes keep the high byte).
local util = require 'image.util'
local py = rawget(_G, '__luabridge_py')

local TENSOR = { float = 'torch.FloatTensor', double = 'torch.DoubleTensor', byte = 'torch.ByteTensor' }
local FORMAT_OF_EXT = { jpg = 'JPEG', jpeg = 'JPEG', png = 'PNG', ppm = 'PPM', pgm = 'PGM' }
local READABLE = { JPEG = true, PNG = true, PPM = true }   -- Pillow names PGM files PPM too

local function result_type(fn, tensortype)
  if tensortype == nil then return torch.getdefaulttensortype() end
  local name = TENSOR[tensortype]
  if not name then
    error(("%s: tensortype must be 'byte', 'float' or 'double', got %s"):format(fn, tostring(tensortype)), 3)
  end
  return name
end

local function checkDepth(fn, depth)
  if depth ~= nil and depth ~= 1 and depth ~= 3 then
    error(('%s: depth must be 1 or 3, got %s'):format(fn, tostring(depth)), 4)
  end
end

-- torch7's depth forcing: 1 takes the luminance of colour images (an H x W result, as torch7's),
-- 3 repeats a grey plane.
local function todepth(img, depth)
  if depth == nil then return img end
  local channels = img:size(1)
  if depth == 1 then
    if channels == 3 or channels == 4 then return image.rgb2y(img:narrow(1, 1, 3))[1] end
    return img:narrow(1, 1, 1)
  end
  if channels >= 3 then return img:narrow(1, 1, 3) end
  return img:narrow(1, 1, 1):expand(3, img:size(2), img:size(3)):clone()
end

-- The most pixels (height x width) a file's header may declare for image to decode it: a guard
-- against decompression bombs (an 849-byte JPEG can declare 12000 x 12000, 3.5 GB as doubles),
-- checked before anything is decoded or allocated. Pillow's MAX_IMAGE_PIXELS, where it warns:
-- 9459 x 9459, 2.1 GB as a DoubleTensor of 3 channels. Set image.maxPixels higher (math.huge: no
-- limit) to read bigger images.
image.maxPixels = image.maxPixels or 89478485

local function describe(source)
  return type(source) == 'string' and source or 'the bytes'
end

-- format, channels, height, width of a file name or a ByteTensor of file bytes, from its header;
-- an error naming fn and the file unless it is a format image reads (expected, when given).
local function probe(fn, source, expected)
  local format, channels, height, width = py.image_info(source)
  local name = describe(source)
  local shown = format or height   -- unread, image_info gives nil, why, and the format its first bytes show
  if expected and shown and shown ~= expected then
    error(('%s: unsupported magic number: %s, not %s, in %s'):format(fn, shown, expected, name), 4)
  end
  if format == nil then
    if not shown and type(source) == 'string' and not source:match('%.(%a+)$') then
      error(fn .. ': unable to determine image type for file: ' .. source, 4)
    end
    error(('%s: cannot read %s: %s'):format(fn, name, channels), 4)
  end
  if not READABLE[format] then   -- as torch7: not a format it reads, so the extension decides
    local ext = type(source) == 'string' and source:match('%.(%a+)$')
    if not ext then error(fn .. ': unable to determine image type for file: ' .. name, 4) end
    error(('%s: unknown image type: %s (%s holds %s)'):format(fn, ext, name, format), 4)
  end
  return format, channels, height, width
end

local function checkSize(fn, name, height, width)
  local limit = image.maxPixels
  if type(limit) ~= 'number' or limit ~= limit or limit < 0 then
    error(('%s: image.maxPixels must be a number of pixels (math.huge: no limit), got %s'):format(
      fn, tostring(limit)), 4)
  end
  if height * width > limit then
    error(('%s: cannot read %s: its header declares %d x %d pixels (%.0f), more than image.maxPixels (%.0f) '
      .. 'allows; set image.maxPixels higher to read it'):format(fn, name, width, height, height * width, limit), 4)
  end
end

-- img (decoded, channels x height x width) at the depth asked for
local function withDepth(fn, name, img, depth)
  local converted, result = pcall(todepth, img, depth)
  -- (asked only of a failure: a tensor is userdata too, and the question is a Python call)
  if not converted and __luabridge_interrupt(result) then error(result, 0) end
  if not converted then   -- the conversion's own message names rgb2y, or is numpy's "Unable to allocate"
    local memory = tostring(result):find('allocate') or tostring(result):find('memory')
    error(('%s: cannot make %s depth %d: %s'):format(fn, name, depth, memory
      and ('not enough memory for its %d x %d pixels'):format(img:size(3), img:size(2)) or tostring(result)), 4)
  end
  return result
end

-- The fast path of the common files: a JPEG of 1 or 3 components, an 8-bit grey, RGB or RGBA
-- PNG. Lua reads the header (FFI, no Python), checks its size against image.maxPixels and counts
-- the JPEG's scans, then one Python call (luabridge/imaging.py's decode_into) decodes the bytes
-- straight into the new tensor: a loader's workers hold the GIL only for that call's few
-- microseconds of Python, so they decode in parallel. Anything else, and any header this reads
-- differently from Pillow, takes the general path below (probe, then py.image_decode), which
-- gives every error its message.
local ffi = require 'ffi'
local bytePtr = ffi.typeof('const uint8_t *')
local uint64 = ffi.typeof('uint64_t')
local MAX_SCANS = py.image_max_scans()
local PNG_SIGNATURE = '\137PNG\r\n\26\n'
local PNG_CHANNELS = { [0] = 1, [2] = 3, [6] = 4 }   -- IHDR colour types: grey, RGB, RGBA
-- JPEG start-of-frame markers (SOF0-15 but DHT C4, JPG C8 and DAC CC), as Pillow's reader takes them
local SOF = {}
for m = 0xC0, 0xCF do SOF[m] = m ~= 0xC4 and m ~= 0xC8 and m ~= 0xCC end

local function be16(p, i) return p[i] * 256 + p[i + 1] end
local function be32(p, i) return ((p[i] * 256 + p[i + 1]) * 256 + p[i + 2]) * 256 + p[i + 3] end

-- channels, height, width of the first frame header of the JPEG at p (n bytes), or nil
local function jpegHeader(p, n)
  local i = 2
  while i + 4 <= n do
    if p[i] ~= 0xFF then return nil end
    local m = p[i + 1]
    if m == 0xFF then   -- a fill byte before a marker
      i = i + 1
    elseif m == 0x01 or (m >= 0xD0 and m <= 0xD8) then   -- TEM, RSTn, SOI: no length
      i = i + 2
    elseif m == 0xDA or m == 0xD9 then   -- a scan or the end before any frame header
      return nil
    else
      local length = be16(p, i + 2)
      if length < 2 or i + 2 + length > n then return nil end
      if SOF[m] then
        if length < 8 then return nil end
        local components = p[i + 9]
        if components ~= 1 and components ~= 3 then return nil end   -- CMYK, YCCK: the general path
        return components, be16(p, i + 5), be16(p, i + 7)
      end
      i = i + 2 + length
    end
  end
  return nil
end

-- FF DA anywhere counts a scan, as imaging.py's _check_scans (entropy-coded data never holds it)
local function jpegScans(p, n)
  local scans = 0
  for i = 0, n - 2 do
    if p[i] == 0xFF and p[i + 1] == 0xDA then scans = scans + 1 end
  end
  return scans
end

-- format, channels, height, width of the bytes at p, when the fast path decodes them
local function fastHeader(p, n)
  if n >= 4 and p[0] == 0xFF and p[1] == 0xD8 and p[2] == 0xFF then
    local channels, height, width = jpegHeader(p, n)
    if channels and jpegScans(p, n) <= MAX_SCANS then return 'JPEG', channels, height, width end
  elseif n >= 33 and ffi.string(p, 8) == PNG_SIGNATURE and be32(p, 8) == 13 and ffi.string(p + 12, 4) == 'IHDR'
      and p[24] == 8 and PNG_CHANNELS[p[25]] then
    return 'PNG', PNG_CHANNELS[p[25]], be32(p, 20), be32(p, 16)
  end
  return nil
end

local function halves(p)
  local u = ffi.cast(uint64, p)
  return tonumber(u / 4294967296ULL), tonumber(u % 4294967296ULL)
end

-- The image decoded by the fast path, or nil for the general path. The bytes (a Lua string, or
-- the tensor's) stay referenced here for the whole call into Python.
local function fastDecode(source, typename, expected)
  local bytes, p, n
  if type(source) == 'string' then
    local f = io.open(source, 'rb')
    if not f then return nil end
    local head = f:read(8)   -- the rest only for a JPEG or a PNG
    local rest = head and (head:sub(1, 3) == '\255\216\255' or head == PNG_SIGNATURE) and f:read('*a')
    f:close()
    if not rest then return nil end
    bytes = head .. rest
    p, n = ffi.cast(bytePtr, bytes), #bytes
  else
    bytes = source:contiguous()
    n = bytes:nElement()
    if n == 0 then return nil end
    p = ffi.cast(bytePtr, bytes:data())
  end
  local format, channels, height, width = fastHeader(p, n)
  local limit = image.maxPixels
  if not format or (expected and format ~= expected) or height < 1 or width < 1
      or type(limit) ~= 'number' or not (height * width <= limit) then
    return nil
  end
  local ok, img = pcall(function() return torch.Tensor():type(typename):resize(channels, height, width) end)
  if not ok and __luabridge_interrupt(img) then error(img, 0) end
  if not ok then return nil end
  local srcHi, srcLo = halves(p)
  local dstHi, dstLo = halves(img:data())
  local done = py.image_decode_into(format, srcHi, srcLo, n, dstHi, dstLo, channels, height, width,
                                    img:elementSize())
  if done == nil then return nil end
  return img, done
end

-- source: a file name or a ByteTensor of file bytes.
local function decode(fn, source, depth, tensortype, expected)
  local typename = result_type(fn, tensortype)
  checkDepth(fn, depth)
  local name = describe(source)
  local img, problem = fastDecode(source, typename, expected)
  if img then
    if problem ~= true then error(('%s: cannot decode %s: %s'):format(fn, name, problem), 3) end
    local result = withDepth(fn, name, img, depth)   -- not a tail call: error levels count this frame
    return result
  end
  local _, channels, height, width = probe(fn, source, expected)
  checkSize(fn, name, height, width)
  local ok, img = pcall(function() return torch.Tensor():type(typename):resize(channels, height, width) end)
  if not ok and __luabridge_interrupt(img) then error(img, 0) end
  if not ok then   -- the allocation's own message names newStorage or resize
    error(('%s: cannot read %s: not enough memory for its %d x %d x %d pixels as a %s'):format(
      fn, name, channels, height, width, typename), 3)
  end
  local problem = py.image_decode(source, img)
  if problem then error(('%s: cannot decode %s: %s'):format(fn, name, problem), 3) end
  local result = withDepth(fn, name, img, depth)
  return result
end

local function loadFile(fn, filename, depth, tensortype, expected)
  if type(filename) ~= 'string' then error(fn .. ': missing file name', 3) end
  local f, err = io.open(filename, 'rb')
  if not f then error(fn .. ': ' .. err, 3) end
  f:close()
  return decode(fn, filename, depth, tensortype, expected)
end

function image.load(filename, depth, tensortype)
  return loadFile('image.load', filename, depth, tensortype)
end

function image.getSize(filename)
  if type(filename) ~= 'string' then error('image.getSize: missing file name', 2) end
  local _, channels, height, width = probe('image.getSize', filename)
  return torch.LongTensor({ channels, height, width })
end

-- A byte copy of an image for an encoder: floats clamped to [0, 1], scaled to 0..255 and rounded.
local function tobytes(fn, tensor)   -- called by encode, called by the public functions
  util.image(fn, tensor, 'image', nil, 5)
  if tensor:dim() == 2 then tensor = tensor:view(1, tensor:size(1), tensor:size(2)) end
  local channels = tensor:size(1)
  if channels ~= 1 and channels ~= 3 and channels ~= 4 and channels ~= 2 then
    error(('%s: image must have 1, 2, 3 or 4 channels, got %s'):format(fn, util.describe(tensor)), 4)
  end
  if torch.typename(tensor) == 'torch.ByteTensor' then return tensor:contiguous() end
  local scaled = torch.DoubleTensor(tensor:size()):copy(tensor):clamp(0, 1):mul(255)
  return util.store(torch.ByteTensor(scaled:size()), scaled)
end

local function encode(fn, filename, tensor, format, quality)
  local bytes = tobytes(fn, tensor)
  if format == 'PPM' and bytes:size(1) ~= 3 then error(fn .. ': can only save 3xHxW images as PPM', 3) end
  if format == 'PGM' then
    if bytes:size(1) ~= 1 then error(fn .. ': can only save 1xHxW or HxW images as PGM', 3) end
    format = 'PPM'
  end
  if format == 'JPEG' and bytes:size(1) ~= 1 and bytes:size(1) ~= 3 then
    error(fn .. ': JPEG takes 1 or 3 channels, got ' .. util.describe(tensor), 3)
  end
  return py.image_encode(filename, bytes, format, quality or 75)
end

function image.save(filename, tensor)
  if type(filename) ~= 'string' or not torch.isTensor(tensor) then
    error('image.save: missing file name | tensor to save', 2)
  end
  local ext = filename:match('%.(%a+)$')
  local format = ext and FORMAT_OF_EXT[ext:lower()]
  if not format then error('image.save: unknown image type: ' .. tostring(ext), 2) end
  encode('image.save', filename, tensor, format)
end

local function bytestensor(s)
  local storage = torch.ByteStorage():string(s)
  return torch.ByteTensor(storage, 1, #s)
end

function image.compressJPG(tensor, quality)
  return bytestensor(encode('image.compressJPG', nil, tensor, 'JPEG', quality))
end

function image.compressPNG(tensor)
  return bytestensor(encode('image.compressPNG', nil, tensor, 'PNG'))
end

local function compressed(fn, tensor)
  if not torch.isTensor(tensor) or torch.typename(tensor) ~= 'torch.ByteTensor' then
    error(fn .. ': input tensor must be a byte tensor, got ' .. util.describe(tensor), 3)
  end
  return tensor
end

function image.decompressJPG(tensor, depth, tensortype)
  return decode('image.decompressJPG', compressed('image.decompressJPG', tensor), depth, tensortype, 'JPEG')
end

function image.decompressPNG(tensor, depth, tensortype)
  return decode('image.decompressPNG', compressed('image.decompressPNG', tensor), depth, tensortype, 'PNG')
end

function image.decompress(tensor, depth, tensortype)
  return decode('image.decompress', compressed('image.decompress', tensor), depth, tensortype)
end

-- torch7's per-format entry points
local FORMAT_OF_LOADER = { JPG = 'JPEG', PNG = 'PNG', PPM = 'PPM' }
for _, format in ipairs({ 'JPG', 'PNG', 'PPM' }) do
  image['load' .. format] = function(filename, depth, tensortype)
    return loadFile('image.load' .. format, filename, depth, tensortype, FORMAT_OF_LOADER[format])
  end
  image['get' .. format .. 'size'] = function(filename)   -- channels, height, width
    local size = image.getSize(filename)
    return size[1], size[2], size[3]
  end
end
image.savePNG = function(filename, tensor) encode('image.savePNG', filename, tensor, 'PNG') end
image.saveJPG = function(filename, tensor) encode('image.saveJPG', filename, tensor, 'JPEG') end
image.savePPM = function(filename, tensor) encode('image.savePPM', filename, tensor, 'PPM') end
image.savePGM = function(filename, tensor) encode('image.savePGM', filename, tensor, 'PGM') end
function image.is_supported(ext) return FORMAT_OF_EXT[ext and ext:lower() or ''] ~= nil end
