-- Colour spaces, each as torch7's ([output,] input) on 3 x H x W images. YUV is a fixed linear map
-- (tensor code here); HSV, HSL, Lab and Y go to luabridge/image_ops.py. Byte images are read and
-- written in 0..255 (Lab refuses them, as torch7).
local util = require 'image.util'
local py = rawget(_G, '__luabridge_py')

-- rows: output channels; columns: weights of the input channels
local YUV_OF_RGB = { { 0.299, 0.587, 0.114 }, { -0.14713, -0.28886, 0.436 }, { 0.615, -0.51499, -0.10001 } }
local RGB_OF_YUV = { { 1, 0, 1.13983 }, { 1, -0.39465, -0.58060 }, { 1, 2.03211, 0 } }

local function linear(fn, matrix)
  return function(...)
    local output, input = util.split(...)
    util.color(fn, input)
    output = util.destination(fn, output, input):resizeAs(input)
    local planes = input:narrow(1, 1, 3):double()
    for k = 1, 3 do
      local w = matrix[k]
      local mixed = planes[1] * w[1] + planes[2] * w[2] + planes[3] * w[3]
      util.store(output[k], mixed)
    end
    return output
  end
end
image.rgb2yuv = linear('image.rgb2yuv', YUV_OF_RGB)
image.yuv2rgb = linear('image.yuv2rgb', RGB_OF_YUV)

local function kernel(name)
  local fn = 'image.' .. name
  return function(...)
    local output, input = util.split(...)
    util.color(fn, input)
    if (name == 'rgb2lab' or name == 'lab2rgb') and torch.typename(input) == 'torch.ByteTensor' then
      error(fn .. ': not supported for torch.ByteTensor', 2)
    end
    output = util.destination(fn, output, input)
    if name == 'rgb2y' then output:resize(1, input:size(2), input:size(3)) else output:resizeAs(input) end
    py.image_convert(name, input, output)
    return output
  end
end
for _, name in ipairs({ 'rgb2y', 'rgb2hsv', 'hsv2rgb', 'rgb2hsl', 'hsl2rgb', 'rgb2lab', 'lab2rgb' }) do
  image[name] = kernel(name)
end

-- normalized RGB: each channel over the sum of the three (+1e-6)
function image.rgb2nrgb(...)
  local output, input = util.split(...)
  util.color('image.rgb2nrgb', input)
  output = util.destination('image.rgb2nrgb', output, input):resizeAs(input):copy(input)
  local sum = input[1]:double() + input[2]:double() + input[3]:double() + 1e-6
  for k = 1, 3 do util.store(output[k], torch.cdiv(input[k]:double(), sum)) end
  return output
end
