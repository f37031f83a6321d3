-- Data augmentation: crops an oheight x owidth patch at a uniformly random place in each image
-- (training), the centre patch in evaluation. With scale = {min, max}, each crop is s times
-- that size (s uniform in [min, max]) and resampled to oheight x owidth (nnx's
-- SpatialReSampling). Input: channels x h x w or a batch of them.
local SpatialUniformCrop, parent = torch.class('nn.SpatialUniformCrop', 'nn.Module')

function SpatialUniformCrop:__init(oheight, owidth, scale)
  parent.__init(self)
  self.oheight = oheight
  self.owidth = owidth or oheight
  self.scale = scale
  if scale ~= nil then
    if torch.type(scale) ~= 'table' then error('nn.SpatialUniformCrop: scale should be a table {min, max}', 2) end
    dpnn.require('nnx')
    self.scaler = nn.SpatialReSampling { owidth = self.owidth, oheight = self.oheight }
  end
end

-- Where image i's crop starts and its size: (h1, w1, height, width).
function SpatialUniformCrop:_window(i, iH, iW)
  if not self.scale then return self.coord[i][1], self.coord[i][2], self.oheight, self.owidth end
  local s = self.scales[i]
  local sh, sw = math.ceil(s * self.oheight), math.ceil(s * self.owidth)
  local h, w = self.coord[i][1], self.coord[i][2]
  -- dpnn's placement (its iH in the width term included, for identical crops)
  local h1 = math.max(1, math.ceil(iH / 2 - (iH - sh) / 2 + h) - math.ceil(sh / 2))
  local w1 = math.max(1, math.ceil(iW / 2 - (iH - sw) / 2 + w) - math.ceil(sw / 2))
  return h1, w1, sh, sw
end

function SpatialUniformCrop:updateOutput(input)
  input = self:toBatch(input, 3)
  local n, iH, iW = input:size(1), input:size(3), input:size(4)
  if iH < self.oheight or iW < self.owidth then
    error(('nn.SpatialUniformCrop: input %dx%d is smaller than the crop %dx%d'):format(iH, iW, self.oheight, self.owidth), 2)
  end
  self.output:resize(n, input:size(2), self.oheight, self.owidth)
  if self.train == false then
    local h1, w1 = math.ceil((iH - self.oheight) / 2), math.ceil((iW - self.owidth) / 2)
    self.output:copy(input:narrow(3, math.max(h1, 1), self.oheight):narrow(4, math.max(w1, 1), self.owidth))
  else
    self.coord = self.coord or torch.IntTensor()
    self.coord:resize(n, 2)
    if self.scale then
      self.scales = self.scales or torch.FloatTensor()
      self.scales:resize(n)
    end
    for i = 1, n do
      if self.scale then
        self.scales[i] = torch.uniform(self.scale.min or self.scale[1], self.scale.max or self.scale[2])
        local sh, sw = math.ceil(self.scales[i] * self.oheight), math.ceil(self.scales[i] * self.owidth)
        self.coord[i][1] = math.ceil(torch.uniform(1e-2, iH - sh))
        self.coord[i][2] = math.ceil(torch.uniform(1e-2, iW - sw))
      else
        self.coord[i][1] = math.max(1, math.ceil(torch.uniform(1e-2, iH - self.oheight)))
        self.coord[i][2] = math.max(1, math.ceil(torch.uniform(1e-2, iW - self.owidth)))
      end
      local h1, w1, h, w = self:_window(i, iH, iW)
      local crop = input[i]:narrow(2, h1, h):narrow(3, w1, w)
      self.output[i]:copy(self.scale and self.scaler:forward(crop) or crop)
    end
  end
  self.output = self:fromBatch(self.output, 1)
  return self.output
end

function SpatialUniformCrop:updateGradInput(input, gradOutput)
  input, gradOutput = self:toBatch(input, 3), self:toBatch(gradOutput, 3)
  self.gradInput:resizeAs(input):zero()
  for i = 1, input:size(1) do
    local h1, w1, h, w = self:_window(i, input:size(3), input:size(4))
    local crop = input[i]:narrow(2, h1, h):narrow(3, w1, w)
    local grad = self.scale and self.scaler:updateGradInput(crop, gradOutput[i]) or gradOutput[i]
    self.gradInput[i]:narrow(2, h1, h):narrow(3, w1, w):copy(grad)
  end
  self.gradInput = self:fromBatch(self.gradInput, 1)
  return self.gradInput
end

function SpatialUniformCrop:type(name, tensorCache)
  self.coord = nil
  return parent.type(self, name, tensorCache)
end
