-- cudnn.LogSoftMax(fast): log-softmax over all of each sample's values (see cudnn.SoftMax).
local LogSoftMax, parent = torch.class('cudnn.LogSoftMax', 'cudnn.SpatialSoftMax')

function LogSoftMax:updateOutput(input)
  self.mode, self.algorithm = 'CUDNN_SOFTMAX_MODE_INSTANCE', 'CUDNN_SOFTMAX_LOG'
  return parent.updateOutput(self, input)
end
