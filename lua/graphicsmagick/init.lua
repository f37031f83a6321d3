-- graphicsmagick: clementfarabet/graphicsmagick's package (Image, load, save, info), its
-- pixels decoded, resampled and encoded by Pillow (luabridge/magick.py) instead of
-- libGraphicsMagick.
require 'torch'

local py = rawget(_G, '__luabridge_py')
local missing = py.gm_missing()
if missing then error(missing, 2) end

local gm = {}
-- images declaring more pixels are refused from their header, as image.maxPixels (Pillow's
-- warning point): raise it to read larger ones
gm.maxPixels = 89478485
gm.Image = require 'graphicsmagick.Image'

function gm.load(path, dataType)
  return gm.Image(path):toTensor(dataType or 'float', 'RGB', 'DHW')
end

function gm.save(path, tensor, quality)
  local dim = tensor:nDimension()
  if dim == 2 or (dim == 3 and tensor:size(1) == 1) then
    tensor = tensor:reshape(1, tensor:size(dim - 1), tensor:size(dim)):expand(3, tensor:size(dim - 1), tensor:size(dim))
  end
  gm.Image(tensor, 'RGB', 'DHW'):save(path, quality)
end

-- width, height and format of an image file (simple), or { error = 'not an image' }
function gm.info(path)
  local ok, image = pcall(gm.Image, path)
  if not ok then return { error = 'not an image' } end
  local width, height = image:size()
  return { width = width, height = height, format = image:format() }
end

return gm
