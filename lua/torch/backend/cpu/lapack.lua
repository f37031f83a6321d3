-- The CPU ops of the LAPACK family (math/lapack.lua checks the arguments and hands over
-- column-major matrices to overwrite, results already sized): each calls its LAPACK routine
-- (numpy's library, via the FFI) and returns LAPACK's info, which the front end turns into
-- torch7's message.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local blas = require 'torch.backend.cpu.blas'
local ptr = require('torch.backend.cpu.apply').ptr

local lapack = blas.lapack
local max = math.max

-- Calls f(work pointer, lwork) to ask the optimal workspace size (lwork = -1), then for real.
local function withWorkspace(like, f)
  local query = like.new():resize(1)
  f(ptr(query), -1)
  local work = like.new():resize(max(1, math.floor(query[1])))
  return f(ptr(work), work._sz[1])
end

local ops = {
  -- A X = B: B becomes X, A its LU factors
  gesv = function(A, B)
    local n = A._sz[1]
    return lapack.gesv(A._dt, n, B._sz[2], ptr(A), n, lapack.ints(n), ptr(B), n)
  end,

  trtrs = function(A, B, uplo, trans, diag)
    local n = A._sz[1]
    return lapack.trtrs(A._dt, uplo, trans, diag, n, B._sz[2], ptr(A), n, ptr(B), n)
  end,

  -- least squares (B has max(m, n) rows; its first n become the solution)
  gels = function(A, B)
    local m, n = A._sz[1], A._sz[2]
    return withWorkspace(A, function(work, lwork)
      return lapack.gels(A._dt, 'N', m, n, B._sz[2], ptr(A), m, ptr(B), B._sz[1], work, lwork)
    end)
  end,

  -- eigenvalues (wr, wi) and, when V is given, right eigenvectors (?geev)
  eig = function(A, wr, wi, V)
    local n = A._sz[1]
    return withWorkspace(A, function(work, lwork)
      return lapack.geev(A._dt, 'N', V and 'V' or 'N', n, ptr(A), n, ptr(wr), ptr(wi), nil, 1,
        V and ptr(V) or nil, V and n or 1, work, lwork)
    end)
  end,

  -- eigenvalues w (and vectors, in V) of the symmetric V (?syev)
  symeig = function(V, w, jobz, uplo)
    local n = V._sz[1]
    return withWorkspace(V, function(work, lwork)
      return lapack.syev(V._dt, jobz, uplo, n, ptr(V), n, ptr(w), work, lwork)
    end)
  end,

  -- A = U diag(s) vt (vt: V^T column-major, n x n; ?gesvd)
  svd = function(A, s, U, vt, jobu)
    local m, n = A._sz[1], A._sz[2]
    return withWorkspace(A, function(work, lwork)
      return lapack.gesvd(A._dt, jobu, jobu, m, n, ptr(A), m, ptr(s), ptr(U), m, ptr(vt), n, work, lwork)
    end)
  end,

  -- A becomes its inverse (LU factors, then the inverse from them)
  inverse = function(A)
    local n = A._sz[1]
    local ipiv = lapack.ints(n)
    local info = lapack.getrf(A._dt, n, n, ptr(A), n, ipiv)
    if info ~= 0 then return info end
    return withWorkspace(A, function(work, lwork)
      return lapack.getri(A._dt, n, ptr(A), n, ipiv, work, lwork)
    end)
  end,

  potrf = function(A, uplo) return lapack.potrf(A._dt, uplo, A._sz[1], ptr(A), A._sz[1]) end,
  potri = function(A, uplo) return lapack.potri(A._dt, uplo, A._sz[1], ptr(A), A._sz[1]) end,

  potrs = function(A, B, uplo)
    local n = A._sz[1]
    return lapack.potrs(A._dt, uplo, n, B._sz[2], ptr(A), n, ptr(B), n)
  end,

  -- the pivoted Cholesky factor; piv (an IntTensor of n) takes the 1-based pivots
  pstrf = function(A, piv, uplo, tol)
    local n = A._sz[1]
    local p = lapack.ints(n)
    local _, info = lapack.pstrf(A._dt, uplo, n, ptr(A), n, p, tol, ptr(A.new():resize(2 * n)))
    for i = 1, n do piv[i] = tonumber(p[i - 1]) end
    return info
  end,

  geqrf = function(A, tau)
    local m, n = A._sz[1], A._sz[2]
    return withWorkspace(A, function(work, lwork)
      return lapack.geqrf(A._dt, m, n, ptr(A), m, ptr(tau), work, lwork)
    end)
  end,

  -- Q (m x n, holding geqrf's reflectors) becomes the matrix of the first #tau reflectors
  orgqr = function(Q, tau)
    local m, k = Q._sz[1], tau._sz[1]
    return withWorkspace(Q, function(work, lwork)
      return lapack.orgqr(Q._dt, m, k, k, ptr(Q), m, ptr(tau), work, lwork)
    end)
  end,

  ormqr = function(A, tau, C, side, trans)
    local m, n = C._sz[1], C._sz[2]
    return withWorkspace(A, function(work, lwork)
      return lapack.ormqr(A._dt, side, trans, m, n, tau._sz[1], ptr(A), A._sz[1], ptr(tau), ptr(C), m, work, lwork)
    end)
  end,
}

-- Without a LAPACK library each op says so.
if not lapack then
  for name in pairs(ops) do
    ops[name] = function()
      check.error(name .. ': LAPACK is not available (luabridge found no BLAS/LAPACK library beside numpy)')
    end
  end
end

backend.register('cpu', ops)
