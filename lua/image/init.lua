-- image: torch7's image package (load/save, geometry, colour spaces, kernels, drawing). Pillow
-- decodes and encodes the files (luabridge/imaging.py); resampling, rotation and colour-space
-- kernels are numpy over the tensors' own memory (luabridge/image_ops.py); the rest is tensor code.
-- Images are C x H x W (or H x W), Byte in 0..255 or Float/Double in [0, 1], as in torch7.
require 'torch'
require 'xlua'
require 'dok'

local missing = rawget(_G, '__luabridge_py').image_missing()
if missing then error(missing, 2) end

image = rawget(_G, 'image') or {}

require 'image.files'
require 'image.geometry'
require 'image.color'
require 'image.kernels'
require 'image.drawing'
require 'image.display'
require 'image.polar'

return image
