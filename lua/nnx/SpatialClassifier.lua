-- Applies a classifier made for K-vectors (batch HW x K -> HW x N) at every pixel of a K x H x W
-- image: the output is N x H x W, or the HW x N matrix itself when spatialOutput is false.
local SpatialClassifier, parent = torch.class('nn.SpatialClassifier', 'nn.Container')

function SpatialClassifier:__init(classifier)
  parent.__init(self)
  self.classifier = classifier or nn.Sequential()
  self.modules = {self.classifier}
  self.spatialOutput = true
  self._pixels = torch.Tensor()
  self._gradPixels = torch.Tensor()
end

function SpatialClassifier:add(module)
  self.classifier:add(module)
  return self
end

-- input (K x H x W) as its HW x K matrix of pixels.
function SpatialClassifier:_pixelRows(input)
  if input:dim() ~= 3 then
    error(('nn.SpatialClassifier: input should be 3D (K x H x W), got size [%s]')
      :format(table.concat(input:size():totable(), 'x')), 3)
  end
  local K, HW = input:size(1), input:size(2) * input:size(3)
  return self._pixels:resize(HW, K):copy(input:contiguous():view(K, HW):t())
end

-- gradOutput in the classifier's HW x N layout.
function SpatialClassifier:_gradRows(gradOutput)
  if not self.spatialOutput then return gradOutput end
  local N, HW = gradOutput:size(1), gradOutput:size(2) * gradOutput:size(3)
  return self._gradPixels:resize(HW, N):copy(gradOutput:contiguous():view(N, HW):t())
end

function SpatialClassifier:updateOutput(input)
  local rows = self.classifier:updateOutput(self:_pixelRows(input))
  if self.spatialOutput then
    local N = rows:size(2)
    self.output = self.output:resize(N, input:size(2) * input:size(3)):copy(rows:t())
      :view(N, input:size(2), input:size(3))
  else
    self.output = rows
  end
  return self.output
end

function SpatialClassifier:updateGradInput(input, gradOutput)
  local rows = self.classifier:updateGradInput(self:_pixelRows(input), self:_gradRows(gradOutput))
  local K = input:size(1)
  self.gradInput = self.gradInput:resize(K, rows:size(1)):copy(rows:t()):view(input:size())
  return self.gradInput
end

function SpatialClassifier:accGradParameters(input, gradOutput, scale)
  self.classifier:accGradParameters(self:_pixelRows(input), self:_gradRows(gradOutput), scale)
end
