-- Colour-space transforms of 3 x H x W images as a module. The linear ones (rgb2yuv, yuv2rgb,
-- rgb2y) are a SpatialLinear with fixed weights and have gradients; the others (rgb2hsl,
-- hsl2rgb, rgb2hsv, hsv2rgb, rgb2nrgb, rgb2y+nrgb) call the image package and are forward only.
local SpatialColorTransform, parent = torch.class('nn.SpatialColorTransform', 'nn.Module')

-- Rows of the linear transforms' matrices (torch7's image/nnx coefficients).
local linear = {
  rgb2yuv = {{0.299, 0.587, 0.114}, {-0.14713, -0.28886, 0.436}, {0.615, -0.51499, -0.10001}},
  yuv2rgb = {{1, 0, 1.13983}, {1, -0.39465, -0.58060}, {1, 2.03211, 0}},
  rgb2y = {{0.299, 0.587, 0.114}},
}
local nonlinear = {rgb2hsl = true, hsl2rgb = true, rgb2hsv = true, hsv2rgb = true,
                   rgb2nrgb = true, ['rgb2y+nrgb'] = true}

function SpatialColorTransform:__init(transform)
  parent.__init(self)
  self.transform = transform
  local rows = linear[transform]
  if rows then
    self.islinear = true
    self.linear = nn.SpatialLinear(3, #rows)
    self.linear.weight:copy(torch.Tensor(rows))
    self.linear.bias:zero()
  elseif nonlinear[transform] then
    self.islinear = false
    require 'image'
  else
    error(('nn.SpatialColorTransform: unknown transform %s (yuv2rgb | rgb2yuv | rgb2y | hsl2rgb | hsv2rgb | '
      .. 'rgb2hsl | rgb2hsv | rgb2nrgb | rgb2y+nrgb)'):format(tostring(transform)), 2)
  end
end

function SpatialColorTransform:updateOutput(input)
  if self.islinear then
    self.output = self.linear:updateOutput(input)
  elseif self.transform == 'rgb2y+nrgb' then
    self.output:resize(4, input:size(2), input:size(3))
    image.rgb2y(self.output:narrow(1, 1, 1), input)
    image.rgb2nrgb(self.output:narrow(1, 2, 3), input)
  else
    self.output = image[self.transform](self.output, input)
  end
  return self.output
end

function SpatialColorTransform:updateGradInput(input, gradOutput)
  if not self.islinear then
    error(('nn.SpatialColorTransform: updateGradInput not implemented for the non-linear transform %s')
      :format(self.transform), 2)
  end
  self.gradInput = self.linear:updateGradInput(input, gradOutput)
  return self.gradInput
end
