-- cudnn: cudnn.torch's layers on luabridge. Each computes as cuDNN does, with nn's code (the
-- convolutions, poolings, activations and batch normalizations are subclasses of their nn
-- layers) or its own (softmax modes, cross-entropy criterions, the fused recurrent layers of
-- RNN.lua), on CUDA tensors or, with LUABRIDGE_CUDA_ON_CPU=1, on the CPU. Checkpoints that
-- hold these classes load as them (after require 'cudnn'; before, the layers nn has read as
-- nn's, see lua/nn/util/legacy.lua). cudnn.convert swaps nn and cudnn layers both ways. The
-- tuning settings (benchmark, fastest, workspace sizes) are kept and change nothing.
local ok, err = pcall(require, 'cunn')
if not ok then package.loaded.cudnn = nil; error(err, 0) end   -- no sentinel left (see cutorch)

cudnn = rawget(_G, 'cudnn') or {}
cudnn.version = 5105   -- cudnnGetVersion() of cuDNN 5.1.5, the release cudnn.torch's bindings target
cudnn.benchmark, cudnn.fastest, cudnn.verbose, cudnn.useFindEx = false, false, false, false
cudnn.initialWorkspaceBytes = 1024
cudnn.reservedGPUBytes = 1024 * 1024
cudnn.maxWorkspaceGPUMemPercent = 95

function cudnn.reset() end
function cudnn.configureMath() end
function cudnn.setSharedWorkspaceSize() end

require 'cudnn.layers'
require 'cudnn.SpatialConvolution'
require 'cudnn.TemporalConvolution'
require 'cudnn.SpatialSoftMax'
require 'cudnn.SpatialLogSoftMax'
require 'cudnn.SoftMax'
require 'cudnn.LogSoftMax'
require 'cudnn.VolumetricSoftMax'
require 'cudnn.VolumetricLogSoftMax'
require 'cudnn.SpatialCrossEntropyCriterion'
require 'cudnn.VolumetricCrossEntropyCriterion'
require 'cudnn.RNN'
require 'cudnn.recurrent'
require 'cudnn.convert'

return cudnn
