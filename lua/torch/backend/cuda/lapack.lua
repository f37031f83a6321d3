-- The LAPACK family on CUDA: gesv, eig, svd, ... run on the CPU only. The front end
-- (math/lapack.lua) checks for CUDA tensors first; each op here raises the error of an op the
-- device lacks (backend.lacks), so that both tables hold the same names.
require('torch.backend').lacks('cuda', {
  'gesv', 'trtrs', 'gels', 'eig', 'symeig', 'svd', 'inverse', 'potrf', 'potri', 'potrs', 'pstrf',
  'geqrf', 'orgqr', 'ormqr',
})
