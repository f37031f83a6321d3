-- Layers taking or giving tables of tensors.
return {
  'SplitTable', 'JoinTable', 'SelectTable', 'NarrowTable', 'FlattenTable', 'ZipTable',
  'CAddTable', 'CSubTable', 'CMulTable', 'CDivTable', 'CMaxTable', 'CMinTable',
  'PairwiseDistance', 'DotProduct', 'CosineDistance', 'MixtureTable', 'ZipTableOneToMany',
  'CAddTensorTable',
}
