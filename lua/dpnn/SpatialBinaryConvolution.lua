-- XNOR-Net's binary-weight convolution (arXiv:1603.05279), no bias: forward convolves with
-- sign(weight) (0 counts as +1) and scales output plane o by alpha_o = mean |weight[o]|;
-- gradInput plane i is scaled by mean |weight[:, i]|. The real weights are put back after
-- accGradParameters (training) or right after forward (evaluation), so updates apply to them.
local SpatialBinaryConvolution, parent = torch.class('nn.SpatialBinaryConvolution', 'nn.SpatialConvolution')

function SpatialBinaryConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  parent.__init(self, nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH)
  self:noBias()
  self.iwh = self.nInputPlane * self.kW * self.kH
  self.owh = self.nOutputPlane * self.kW * self.kH
  self.train = true
end

-- Keeps the real weights in tempWeight, computes both scalings, replaces weight by its sign.
function SpatialBinaryConvolution:binarizeWeight()
  self.tempWeight = self.tempWeight or self.weight.new()
  self.tempWeight:resizeAs(self.weight):copy(self.weight)
  self.alphas = self.alphas or self.weight.new()
  self.alphas:norm(self.weight:view(self.nOutputPlane, -1), 1, 2):div(self.iwh)
  self.gradInputAlphas = self.gradInputAlphas or self.weight.new()
  local perInput = self.weight:transpose(1, 2):contiguous():view(self.nInputPlane, -1)
  self.gradInputAlphas:norm(perInput, 1, 2):div(self.owh)
  self.weight:sign()
  self.weight:maskedFill(self.weight:eq(0), 1)
end

-- Multiplies each plane of x (planes along dim 1, or 2 for a batch) by scales[plane].
local function scalePlanes(x, scales)
  local shape = x:dim() == 4 and { 1, scales:nElement(), 1, 1 } or { scales:nElement(), 1, 1 }
  return x:cmul(scales:view(table.unpack(shape)):expandAs(x))
end

function SpatialBinaryConvolution:updateOutput(input)
  self:binarizeWeight()
  self.output = scalePlanes(parent.updateOutput(self, input), self.alphas)
  if not self.train then self.weight:copy(self.tempWeight) end
  return self.output
end

function SpatialBinaryConvolution:updateGradInput(input, gradOutput)
  self.gradInput = scalePlanes(parent.updateGradInput(self, input, gradOutput), self.gradInputAlphas)
  return self.gradInput
end

function SpatialBinaryConvolution:accGradParameters(input, gradOutput, scale)
  parent.accGradParameters(self, input, gradOutput, scale)
  self.weight:copy(self.tempWeight)
end

function SpatialBinaryConvolution:type(name, tensorCache)
  self.tempWeight, self.alphas, self.gradInputAlphas = nil, nil, nil
  return parent.type(self, name, tensorCache)
end

function SpatialBinaryConvolution:__tostring__()
  return 'Binary Convolution: ' .. parent.__tostring__(self)
end
