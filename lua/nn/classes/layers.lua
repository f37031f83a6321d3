-- Simple layers and activations (parents before their subclasses).
return {
  'Linear',
  'Threshold', 'ReLU', 'HardTanh', 'Clamp', 'ReLU6', 'LeakyReLU', 'ELU',
  'Tanh', 'Sigmoid', 'Exp', 'Log', 'Abs', 'Square', 'Sqrt', 'Power',
  'SoftSign', 'LogSigmoid', 'TanhShrink', 'HardShrink', 'SoftShrink', 'SoftPlus',
  'SoftMax', 'SoftMin', 'LogSoftMax', 'SpatialSoftMax', 'SpatialLogSoftMax',
  'View', 'Reshape', 'Dropout',
  'MulConstant', 'AddConstant', 'GradientReversal', 'Contiguous', 'Copy', 'Narrow', 'Select',
  'Index', 'Squeeze', 'Unsqueeze', 'Transpose', 'Padding', 'Replicate', 'Sum', 'Mean', 'Max', 'Min',
  'Mul', 'CMul', 'Add', 'CAdd', 'PReLU', 'RReLU', 'GatedLinearUnit', 'CReLU', 'Normalize', 'MM', 'MV',
  'L1Penalty', 'Constant', 'OneHot', 'SpatialDropout', 'VolumetricDropout', 'LookupTable',
  'BatchNormalization', 'Euclidean', 'WeightedEuclidean', 'Cosine', 'Bilinear', 'Maxout',
  'Collapse', 'ZeroGrad', 'WhiteNoise', 'MaskedSelect', 'PixelShuffle', 'Profile', 'DontCast', 'NaN', 'PrintSize', 'Convert', 'UpSampling',
  'SparseLinear', 'IndexLinear', 'WeightNorm', 'LinearWeightNorm', 'PartialLinear', 'Kmeans',
}
