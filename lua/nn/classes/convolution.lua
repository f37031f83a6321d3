return {
  'SpatialConvolution', 'SpatialConvolutionMM', 'SpatialDilatedConvolution', 'SpatialFullConvolution',
  'SpatialMaxPooling', 'SpatialDilatedMaxPooling', 'SpatialAveragePooling', 'SpatialSubSampling',
  'VolumetricMaxPooling', 'VolumetricDilatedMaxPooling', 'VolumetricAveragePooling',
  'SpatialAdaptiveMaxPooling', 'SpatialAdaptiveAveragePooling', 'SpatialMaxUnpooling',
  'SpatialZeroPadding', 'SpatialReflectionPadding', 'SpatialReplicationPadding',
  'SpatialBatchNormalization', 'VolumetricBatchNormalization',
  'SpatialUpSamplingNearest', 'SpatialUpSamplingBilinear', 'SpatialCrossMapLRN',
  'TemporalConvolution', 'TemporalSubSampling', 'TemporalMaxPooling',
  'VolumetricConvolution', 'VolumetricDilatedConvolution',
}
