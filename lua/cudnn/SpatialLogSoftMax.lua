-- cudnn.SpatialLogSoftMax(fast): log-softmax over the planes at each position (see SpatialSoftMax).
local SpatialLogSoftMax, parent = torch.class('cudnn.SpatialLogSoftMax', 'cudnn.SpatialSoftMax')

function SpatialLogSoftMax:__init(fast)
  parent.__init(self, fast)
  self.mode, self.algorithm = 'CUDNN_SOFTMAX_MODE_CHANNEL', 'CUDNN_SOFTMAX_LOG'
end
