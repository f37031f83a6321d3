-- cudnn.VolumetricLogSoftMax(fast): log-softmax over the planes at each position of 4D or 5D
-- input (see VolumetricSoftMax).
local VolumetricLogSoftMax, parent = torch.class('cudnn.VolumetricLogSoftMax', 'cudnn.VolumetricSoftMax')

function VolumetricLogSoftMax:__init(fast)
  parent.__init(self, fast)
  self.ssm.mode, self.ssm.algorithm = 'CUDNN_SOFTMAX_MODE_CHANNEL', 'CUDNN_SOFTMAX_LOG'
end
