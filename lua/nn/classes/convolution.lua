return {
  'SpatialConvolution', 'SpatialConvolutionMM', 'SpatialDilatedConvolution', 'SpatialFullConvolution',
  'SpatialConvolutionLocal',
  'SpatialMaxPooling', 'SpatialDilatedMaxPooling', 'SpatialAveragePooling', 'SpatialSubSampling',
  'VolumetricMaxPooling', 'VolumetricDilatedMaxPooling', 'VolumetricAveragePooling',
  'SpatialAdaptiveMaxPooling', 'SpatialAdaptiveAveragePooling', 'SpatialMaxUnpooling',
  'VolumetricMaxUnpooling',
  'SpatialZeroPadding', 'SpatialReflectionPadding', 'SpatialReplicationPadding',
  'VolumetricReplicationPadding',
  'SpatialBatchNormalization', 'VolumetricBatchNormalization',
  'SpatialUpSamplingNearest', 'SpatialUpSamplingBilinear', 'SpatialCrossMapLRN',
  'TemporalConvolution', 'TemporalSubSampling', 'TemporalMaxPooling',
  'VolumetricConvolution', 'VolumetricDilatedConvolution', 'VolumetricFullConvolution',
}
