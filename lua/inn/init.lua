-- inn: Sergey Zagoruyko's imagine-nn (szagoruyko/imagine-nn), the layers Torch7 detection code
-- (Fast R-CNN style ROI pooling, SPP-net, DeepMask's frozen batch norm) builds on. Written here
-- in Lua over our nn: ROIPooling ran as CUDA kernels only in imagine-nn and runs on the CPU here
-- with the same rounding; the other classes were Lua compositions of nn modules there too.
-- SpatialStochasticPooling (CUDA only there) is not provided.
require 'nn'
inn = require 'inn.env'

for _, name in ipairs { 'SpatialMaxPooling', 'SpatialAveragePooling', 'SpatialCrossResponseNormalization',
                        'MeanSubtraction', 'SpatialPyramidPooling', 'SpatialSameResponseNormalization',
                        'ROIPooling', 'ConstAffine' } do
  require('inn.' .. name)
end
inn.utils = require 'inn.utils'
return inn
