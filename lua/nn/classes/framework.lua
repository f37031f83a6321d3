return {
  'utils', 'Module', 'Criterion', 'Jacobian', 'SparseJacobian',
  'Container', 'Sequential', 'Parallel', 'Concat', 'DepthConcat', 'ConcatTable', 'ParallelTable',
  'MapTable', 'Identity', 'Decorator', 'Bottle', 'hessian', 'GPU',
}
