return {
  'utils', 'Module', 'Criterion', 'Jacobian',
  'Container', 'Sequential', 'Parallel', 'Concat', 'DepthConcat', 'ConcatTable', 'ParallelTable',
  'MapTable', 'Identity', 'Decorator', 'Bottle', 'hessian',
}
