-- The CUDA op table's criterion passes over class-index targets: the same names as
-- backend/cpu/nn_loss.lua. ClassNLLCriterion's are marshallers (backend/cuda/nn.lua:
-- class_nll_forward, class_nll_backward); SpatialClassNLLCriterion's run them on the pixels as
-- rows.
local backend = require 'torch.backend'

local ops = {}

-- input N x C x H x W as (N*H*W) x C rows of log-probabilities (a copy in m._rows), and the
-- target as their classes.
local function pixelRows(m, input, target)
  m._rows = m._rows or input.new()
  local n, c, h, w = input:size(1), input:size(2), input:size(3), input:size(4)
  m._rows:resize(n, h, w, c):copy(input:permute(1, 3, 4, 2))
  return m._rows:view(n * h * w, c), target:contiguous():view(n * h * w)
end

function ops.spatial_class_nll_forward(m, input, target, weights)
  local rows, t = pixelRows(m, input, target)
  return backend.cuda.class_nll_forward(rows, t, weights, -1)
end

-- the rows' gradient, permuted back
function ops.spatial_class_nll_backward(m, gradInput, input, target, weights, sizeAverage)
  local rows, t = pixelRows(m, input, target)
  backend.cuda.class_nll_backward(rows, t, weights, -1, sizeAverage)
  local n, c, h, w = input:size(1), input:size(2), input:size(3), input:size(4)
  gradInput:resizeAs(input):copy(rows:view(n, h, w, c):permute(1, 4, 2, 3))
end

backend.register('cuda', ops)
-- The CPU criterions' loops (MultiMarginCriterion, MultiLabelMarginCriterion,
-- CosineEmbeddingCriterion, the class-index range check): those criterions take CPU tensors
-- only and say so first (nn.util.loss's checkHost); a device tensor reaching one of these is
-- the error of an op the device lacks.
backend.lacks('cuda', { 'class_target_check', 'multi_margin_forward', 'multi_margin_backward',
  'multi_label_margin_mark', 'multi_label_margin', 'cosine_embedding_forward', 'cosine_embedding_coef' })
