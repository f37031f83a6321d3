-- LeNet-5 (LeCun et al., 1998) in torch7's nn, as legacy model files were written: the file
-- returns a function that builds the network.
--
--   local lenet = dofile('examples/models/lenet.lua')
--   local model = lenet{size = 28, classes = 10, activation = 'ReLU'}
--
-- Input: batch x 1 x size x size (or 1 x size x size). Output: log-probabilities per class,
-- for nn.ClassNLLCriterion.
require 'nn'

return function(opt)
  opt = opt or {}
  local size = opt.size or 28
  local classes = opt.classes or 10
  local activation = nn[opt.activation or 'ReLU']
  -- each stage: a 5x5 valid convolution then 2x2 max pooling
  local side = math.floor((math.floor((size - 4) / 2) - 4) / 2)
  if side < 1 then error('lenet: images of side ' .. size .. ' are too small (16 at least)', 2) end
  local features = 16 * side * side

  local model = nn.Sequential()
  model:add(nn.SpatialConvolution(1, 6, 5, 5))
  model:add(activation())
  model:add(nn.SpatialMaxPooling(2, 2, 2, 2))
  model:add(nn.SpatialConvolution(6, 16, 5, 5))
  model:add(activation())
  model:add(nn.SpatialMaxPooling(2, 2, 2, 2))
  model:add(nn.View(features))
  model:add(nn.Linear(features, 120))
  model:add(activation())
  model:add(nn.Linear(120, 84))
  model:add(activation())
  model:add(nn.Linear(84, classes))
  model:add(nn.LogSoftMax())
  return model
end
