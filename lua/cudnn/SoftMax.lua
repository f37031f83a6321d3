-- cudnn.SoftMax(fast): softmax over all of each sample's values (cuDNN's instance mode; for
-- 1D and 2D input that is nn.SoftMax, for 3D and 4D it is not: nn's normalizes each position).
local SoftMax, parent = torch.class('cudnn.SoftMax', 'cudnn.SpatialSoftMax')

function SoftMax:updateOutput(input)
  self.mode = 'CUDNN_SOFTMAX_MODE_INSTANCE'
  return parent.updateOutput(self, input)
end
