-- Criterions (parents before their subclasses).
return {
  'MSECriterion', 'WeightedMSECriterion', 'AbsCriterion', 'SmoothL1Criterion',
  'DistKLDivCriterion', 'MarginCriterion', 'SoftMarginCriterion', 'BCECriterion',
  'MultiLabelSoftMarginCriterion', 'ClassNLLCriterion', 'CrossEntropyCriterion',
  'SpatialClassNLLCriterion', 'MultiMarginCriterion', 'MultiLabelMarginCriterion',
  'HingeEmbeddingCriterion', 'L1HingeEmbeddingCriterion', 'CosineEmbeddingCriterion',
  'MarginRankingCriterion', 'ParallelCriterion', 'MultiCriterion',
  'L1Cost', 'ModuleCriterion', 'CriterionTable', 'DistanceRatioCriterion', 'ClassSimplexCriterion',
  'SpatialAutoCropMSECriterion',
}
