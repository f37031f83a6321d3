-- A pyramid of scales of one C x H x W image, each processed by its own module, giving a table
-- of feature maps. Unfocused (global) mode: scale i averages the image down by ratios[i], pads it
-- for the processor's kW x kH / dW x dH window, processes it and upsamples the result by
-- ratios[i] again. Focused mode (focus(x, y, w, h)): each scale crops the window around (x, y)
-- that yields a w x h output, then downsamples and processes it (training on patches).
-- With prescaled_input the input is already a table of scales (unfocused mode only).
local SpatialPyramid, parent = torch.class('nn.SpatialPyramid', 'nn.Module')

function SpatialPyramid:__init(ratios, processors, kW, kH, dW, dH, xDimIn, yDimIn,
                               xDimOut, yDimOut, prescaled_input)
  parent.__init(self)
  if #ratios ~= #processors then
    error(('nn.SpatialPyramid: %d ratios but %d processors'):format(#ratios, #processors), 2)
  end
  self.ratios, self.processors = ratios, processors
  self.kW, self.kH, self.dW, self.dH = kW, kH, dW, dH
  self.prescaled_input = prescaled_input or false
  self.focused, self.x, self.y = false, 0, 0
  local padW, padH = kW - dW, kH - dH
  self.focused_pipeline = nn.ConcatTable()
  self.unfocused_pipeline = prescaled_input and nn.ParallelTable() or nn.ConcatTable()
  for i, ratio in ipairs(ratios) do
    local down = function()
      return nn.SpatialReSamplingEx{rwidth = 1 / ratio, rheight = 1 / ratio,
                                    xDim = xDimIn, yDim = yDimIn, mode = 'average'}
    end
    -- its paddings are set by each focus
    self.focused_pipeline:add(nn.Sequential()
      :add(nn.SpatialPadding(0, 0, 0, 0, yDimIn, xDimIn)):add(down()):add(processors[i]))
    local global = nn.Sequential()
    if not prescaled_input then
      global:add(down())
      global:add(nn.SpatialPadding(math.floor(padW / 2), math.ceil(padW / 2),
                                   math.floor(padH / 2), math.ceil(padH / 2), yDimIn, xDimIn))
    end
    global:add(processors[i])
    global:add(nn.SpatialReSamplingEx{rwidth = ratio, rheight = ratio, xDim = xDimOut, yDim = yDimOut,
                                      mode = 'simple'})
    self.unfocused_pipeline:add(global)
  end
  self.modules = {self.focused_pipeline, self.unfocused_pipeline}
end

function SpatialPyramid:focus(x, y, w, h)
  w, h = w or 1, h or 1
  if not (x and y) then
    self.focused = false
    return
  end
  self.x, self.y, self.focused = x, y, true
  self.winWidth, self.winHeight = {}, {}
  for i, ratio in ipairs(self.ratios) do
    self.winWidth[i] = ratio * ((w - 1) * self.dW + self.kW)
    self.winHeight[i] = ratio * ((h - 1) * self.dH + self.kH)
  end
end

-- Paddings (negative: crops) that cut each scale's window around (x, y) out of a wImg x hImg image.
function SpatialPyramid:configureFocus(wImg, hImg)
  for i = 1, #self.ratios do
    local padder = self.focused_pipeline.modules[i].modules[1]
    padder.pad_l = math.ceil(self.winWidth[i] / 2) - self.x
    padder.pad_r = self.x + math.floor(self.winWidth[i] / 2) - wImg
    padder.pad_t = math.ceil(self.winHeight[i] / 2) - self.y
    padder.pad_b = self.y + math.floor(self.winHeight[i] / 2) - hImg
  end
end

function SpatialPyramid:_pipeline()
  return self.focused and self.focused_pipeline or self.unfocused_pipeline
end

function SpatialPyramid:updateOutput(input)
  if not self.prescaled_input then
    for _, ratio in ipairs(self.ratios) do
      if math.fmod(input:size(2), ratio) ~= 0 or math.fmod(input:size(3), ratio) ~= 0 then
        error(('nn.SpatialPyramid: input sizes must be multiples of the ratios (got %dx%d, ratio %s)')
          :format(input:size(2), input:size(3), tostring(ratio)), 2)
      end
    end
  end
  if self.focused then self:configureFocus(input:size(3), input:size(2)) end
  self.output = self:_pipeline():updateOutput(input)
  return self.output
end

function SpatialPyramid:updateGradInput(input, gradOutput)
  self.gradInput = self:_pipeline():updateGradInput(input, gradOutput)
  return self.gradInput
end

function SpatialPyramid:accGradParameters(input, gradOutput, scale)
  self:_pipeline():accGradParameters(input, gradOutput, scale)
end

-- Both pipelines share the processors: their parameters once.
function SpatialPyramid:parameters()
  return self:_pipeline():parameters()
end

function SpatialPyramid:__tostring__()
  local mode = self.focused and 'focused' or 'unfocused'
  return ('nn.SpatialPyramid (%s)\n    |    %s'):format(mode, tostring(self:_pipeline()):gsub('\n', '\n    |    '))
end
