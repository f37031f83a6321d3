-- Linear algebra through LAPACK (numpy's library, via the FFI), with torch7's functions,
-- argument orders and result conventions: gesv trtrs gels eig symeig svd inverse potrf potrs
-- potri pstrf qr geqrf orgqr ormqr, for Float and Double tensors. The checks, the column-major
-- copies and the results are made here; the LAPACK calls are ops of the backend (CPU only:
-- backend/cpu/lapack.lua), each returning LAPACK's info.
--
-- As in torch7, matrices handed to LAPACK are column-major, and result tensors are left that
-- way: a result is reused (resized, then transposed in place when contiguous) so that it comes
-- back with strides (1, rows).
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local overlaps = require('torch.math.blas').overlaps

local max, min = math.max, math.min
local isTensor = torch.isTensor

local function isColumnMajor(t, rows, cols)
  return #t._sz == 2 and t._sz[1] == rows and t._sz[2] == cols
    and (t._str[1] == 1 or rows == 1) and (t._str[2] == rows or cols == 1)
end

-- (new size and stride arrays, never the old ones changed: a tensor's arrays are immutable once
-- installed, which compiled chains rely on, nn_chain.lua's cachedChecks)
local function transposeInPlace(t)
  t._sz, t._str = { t._sz[2], t._sz[1] }, { t._str[2], t._str[1] }
end

-- A rows x cols column-major tensor for LAPACK to write: res itself when it can be made one
-- (torch7 resizes it to cols x rows and transposes it in place), else a new one.
local function columnMajorResult(res, like, rows, cols)
  if res then
    res:resize(cols, rows)
    if res:isContiguous() then transposeInPlace(res) end
    if isColumnMajor(res, rows, cols) then return res end
  end
  return like.new():resize(cols, rows):t()
end

-- A column-major copy of matrix src with nrows rows (src's rows first) for LAPACK to overwrite:
-- src itself when res is src and already fits, else res (see columnMajorResult).
local function columnMajor(res, src, nrows)
  nrows = nrows or src._sz[1]
  if res == src and isColumnMajor(src, nrows, src._sz[2]) then return src end
  local work = columnMajorResult(res ~= src and res or nil, src, nrows, src._sz[2])
  if overlaps(work, src) then src = src:clone() end
  work:narrow(1, 1, src._sz[1]):copy(src)
  return work
end

-- The result: res, holding work's values when LAPACK worked elsewhere.
local function finish(work, res)
  if res and res ~= work then res:resizeAs(work):copy(work) end
  return res or work
end

------------------------------------------------------------------------------------------------
-- argument checks

local function usable(op, t, name)
  check.tensorOf(op, t, name)
  local dt = (t._dt.host or t._dt).name   -- a CUDA tensor gets as far as its backend's op
  if dt ~= 'Float' and dt ~= 'Double' then
    check.error(('%s: only torch.FloatTensor and torch.DoubleTensor are supported, got %s'):format(op, torch.typename(t)))
  end
  return t
end

local function matrix(op, t, name, square)
  usable(op, t, name)
  if #t._sz ~= 2 then check.error(('%s: %s should have 2 dimensions, but has %d'):format(op, name, #t._sz)) end
  if square and t._sz[1] ~= t._sz[2] then
    check.error(('%s: %s should be square, but is %s'):format(op, name, check.sizestr(t)))
  end
  if t._sz[1] == 0 or t._sz[2] == 0 then check.error(('%s: %s is empty (%s)'):format(op, name, check.sizestr(t))) end
  return t
end

-- B of A X = B: a matrix, or a vector seen as one column; its rows must match A's.
local function rightHandSide(op, b, a)
  usable(op, b, 'B')
  local nd = #b._sz
  if nd ~= 1 and nd ~= 2 then check.error(('%s: B should have 1 or 2 dimensions, but has %d'):format(op, nd)) end
  if b._sz[1] ~= a._sz[1] then
    check.error(('%s: A,B size incompatible - A has %d rows, B has %d'):format(op, a._sz[1], b._sz[1]))
  end
  if nd == 1 then b = b:unsqueeze(2) end
  if b._sz[2] == 0 then check.error(op .. ': B is empty (' .. check.sizestr(b) .. ')') end
  return b
end

-- Checks matrix A (square when asked) and the result tensors given (of A's type).
local function input(op, a, square, ...)
  matrix(op, a, 'A', square)
  for i = 1, select('#', ...) do
    local r = select(i, ...)
    if r ~= nil then
      check.tensorOf(op, r, 'result')
      check.sameType(op, a, r)
    end
  end
end

-- A char option: one of the letters in allowed, default when nil.
local function option(op, value, default, allowed, name)
  value = value or default
  if type(value) ~= 'string' or #value ~= 1 or not allowed:find(value, 1, true) then
    local choices = {}
    for c in allowed:gmatch('.') do choices[#choices + 1] = "'" .. c .. "'" end
    check.error(('%s: %s must be %s, got %s'):format(op, name, table.concat(choices, ' or '), tostring(value)))
  end
  return value
end

-- torch7's function forms torch.f([r1, ..., rn,] inputs...): the results are given when
-- argument nres + nin is a tensor; otherwise they come back nil.
local function withResults(nres, nin, ...)
  if isTensor((select(nres + nin, ...))) then return ... end
  if nres == 1 then return nil, ... elseif nres == 2 then return nil, nil, ... end
  return nil, nil, nil, ...
end

-- Raises op's error for LAPACK's info: < 0, a rejected argument; > 0, message with each %d
-- standing for info.
local function failed(op, info, message)
  if info < 0 then check.error(('%s: LAPACK rejected argument %d'):format(op, -info)) end
  if info > 0 then check.error(op .. ': ' .. (message:gsub('%%d', info))) end
end

------------------------------------------------------------------------------------------------
-- linear systems

-- Checks A X = B and gives column-major copies of A and B for LAPACK to overwrite, in ra and
-- rb when given (so callers check their options first). B's copy has max(m, n) rows: room for
-- gels' n-row solution (m when A is square).
local function linearSystem(op, rb, ra, b, a, square)
  input(op, a, square, rb, ra)
  b = rightHandSide(op, b, a)
  check.sameType(op, a, b)
  if ra and overlaps(ra, b) then b = b:clone() end
  return columnMajor(ra, a), columnMajor(rb, b, max(a._sz[1], a._sz[2]))
end

-- torch.gesv([resb, resa,] B, A): X, LU with A X = B
local function gesv(...)
  local rb, ra, b, a = withResults(2, 2, ...)
  local A, B = linearSystem('gesv', rb, ra, b, a, true)
  failed('gesv', backend.of(A).gesv(A, B), 'U(%d,%d) is zero, singular U')
  return finish(B, rb), finish(A, ra)
end

-- torch.trtrs([resb, resa,] B, A [, uplo [, trans [, diag]]]): X with op(A) X = B, A triangular
local function trtrs(...)
  local rb, ra, b, a, uplo, trans, diag = withResults(2, 2, ...)
  uplo = option('trtrs', uplo, 'U', 'UL', 'uplo')
  trans = option('trtrs', trans, 'N', 'NT', 'trans')
  diag = option('trtrs', diag, 'N', 'NU', 'diag')
  local A, B = linearSystem('trtrs', rb, ra, b, a, true)
  failed('trtrs', backend.of(A).trtrs(A, B, uplo, trans, diag), 'A(%d,%d) is zero, singular A')
  return finish(B, rb), finish(A, ra)
end

-- torch.gels([resb, resa,] B, A): least squares (m >= n) or minimum norm (m < n) solution
local function gels(...)
  local rb, ra, b, a = withResults(2, 2, ...)
  local A, B = linearSystem('gels', rb, ra, b, a, false)
  failed('gels', backend.of(A).gels(A, B), 'the %d-th diagonal element of the triangular factor of A is zero')
  local sz = { unpack(B._sz) }
  sz[1] = a._sz[2]   -- the solution is the first n rows (B keeps its leading dimension)
  B._sz = sz
  return finish(B, rb), finish(A, ra)
end

------------------------------------------------------------------------------------------------
-- eigenvalues and singular values

-- torch.eig([rese, resv,] A [, 'N'|'V']): eigenvalues as n x 2 (real, imaginary) and the right
-- eigenvectors as columns of V (LAPACK's real form for complex pairs)
local function eig(...)
  local re, rv, a, jobvr = withResults(2, 1, ...)
  input('eig', a, true, re, rv)
  jobvr = option('eig', jobvr, 'N', 'NV', 'jobvr')
  local n = a._sz[1]
  local A = columnMajor(nil, a)
  local wr, wi = a.new():resize(n), a.new():resize(n)
  local V
  if jobvr == 'V' then
    rv = rv or a.new()
    V = columnMajorResult(rv, a, n, n)
  end
  failed('eig', backend.of(A).eig(A, wr, wi, V), 'the QR algorithm failed to compute all the eigenvalues (%d did not converge)')
  re = re or a.new()
  re:resize(n, 2)
  re:select(2, 1):copy(wr)
  re:select(2, 2):copy(wi)
  if V then finish(V, rv) end
  return re, rv or a.new()
end

-- torch.symeig([rese, resv,] A [, 'N'|'V' [, 'U'|'L']]): eigenvalues (ascending) and vectors
-- of the symmetric matrix whose uplo triangle A holds
local function symeig(...)
  local re, rv, a, jobz, uplo = withResults(2, 1, ...)
  input('symeig', a, true, re, rv)
  jobz = option('symeig', jobz, 'N', 'NV', 'jobz')
  uplo = option('symeig', uplo, 'U', 'UL', 'uplo')
  local n = a._sz[1]
  local V = columnMajor(rv, a)
  local w = a.new():resize(n)
  failed('symeig', backend.of(V).symeig(V, w, jobz, uplo), '%d off-diagonal elements did not converge to zero')
  return finish(w, re), finish(V, rv)
end

-- torch.svd([resu, ress, resv,] A [, 'S'|'A']): U, S, V with A = U diag(S) V^T
local function svd(...)
  local ru, rs, rv, a, jobu = withResults(3, 1, ...)
  input('svd', a, false, ru, rs, rv)
  jobu = option('svd', jobu, 'S', 'SA', 'jobu')
  local m, n = a._sz[1], a._sz[2]
  local k = min(m, n)
  local A = columnMajor(nil, a)
  local U = columnMajorResult(ru or a.new(), a, m, jobu == 'A' and m or k)
  local s = a.new():resize(k)
  local vt = a.new():resize(n, n)   -- V^T column-major, i.e. V row by row
  failed('svd', backend.of(A).svd(A, s, U, vt, jobu), '%d superdiagonals failed to converge')
  local V = jobu == 'S' and vt:narrow(2, 1, k) or vt
  return finish(U, ru), finish(s, rs), finish(V, rv or a.new())
end

------------------------------------------------------------------------------------------------
-- inverse and Cholesky

-- torch.inverse([res,] A)
local function inverse(...)
  local ra, a = withResults(1, 1, ...)
  input('inverse', a, true, ra)
  local A = columnMajor(ra, a)
  failed('inverse', backend.of(A).inverse(A), 'U(%d,%d) is 0, U is singular')
  return finish(A, ra)
end

-- Keeps the uplo triangle of square A (zeroing the other one), in place.
local function keepTriangle(A, uplo)
  if uplo == 'U' then torch.triu(A, A) else torch.tril(A, A) end
end

-- Copies the uplo triangle of square A onto the other one, in place (a symmetric matrix).
local function mirrorTriangle(A, uplo)
  local n = A._sz[1]
  for j = 1, n - 1 do
    local row, col = A:select(1, j):narrow(1, j + 1, n - j), A:select(2, j):narrow(1, j + 1, n - j)
    if uplo == 'U' then col:copy(row) else row:copy(col) end
  end
end

-- op([res,] A [, 'U'|'L']) for LAPACK routines working on A's uplo triangle in place; tidy
-- then sets the other triangle.
local function onTriangle(op, message, tidy)
  return function(...)
    local ra, a, uplo = withResults(1, 1, ...)
    input(op, a, true, ra)
    uplo = option(op, uplo, 'U', 'UL', 'uplo')
    local A = columnMajor(ra, a)
    failed(op, backend.of(A)[op](A, uplo), message)
    tidy(A, uplo)
    return finish(A, ra)
  end
end

-- torch.potrf([res,] A [, 'U'|'L']): the Cholesky factor (U^T U = A, or L L^T = A)
local potrf = onTriangle('potrf', 'the leading minor of order %d is not positive definite', keepTriangle)

-- torch.potri([res,] chol [, 'U'|'L']): the inverse of A from its Cholesky factor
local potri = onTriangle('potri', 'A(%d,%d) is 0, A cannot be factorized', mirrorTriangle)

-- torch.potrs([res,] B, chol [, 'U'|'L']): X with A X = B, given A's Cholesky factor
local function potrs(...)
  local rb, b, a, uplo = withResults(1, 2, ...)
  uplo = option('potrs', uplo, 'U', 'UL', 'uplo')
  local A, B = linearSystem('potrs', rb, nil, b, a, true)
  failed('potrs', backend.of(A).potrs(A, B, uplo), 'A(%d,%d) is zero, singular A')
  return finish(B, rb)
end

-- torch.pstrf([res, piv,] A [, 'U'|'L' [, tol]]): the pivoted Cholesky factor of a positive
-- semidefinite A and the (1-based) pivots as an IntTensor: U^T U = A[piv][piv] ('U')
local function pstrf(...)
  local ra, rpiv, a, uplo, tol = withResults(2, 1, ...)
  input('pstrf', a, true, ra)
  if rpiv ~= nil and torch.typename(rpiv) ~= 'torch.IntTensor' then
    check.error('pstrf: the pivots result must be a torch.IntTensor, got ' .. torch.type(rpiv))
  end
  uplo = option('pstrf', uplo, 'U', 'UL', 'uplo')
  tol = check.number('pstrf', tol or -1, 'tol')
  local n = a._sz[1]
  local A = columnMajor(ra, a)
  rpiv = (rpiv or torch.IntTensor()):resize(n)
  failed('pstrf', backend.of(A).pstrf(A, rpiv, uplo, tol), 'matrix is rank deficient or not positive semidefinite')
  keepTriangle(A, uplo)
  return finish(A, ra), rpiv
end

------------------------------------------------------------------------------------------------
-- QR

-- torch.geqrf([res, tau,] A): R above the diagonal and Householder reflectors below, and tau
local function geqrf(...)
  local ra, rtau, a = withResults(2, 1, ...)
  input('geqrf', a, false, ra, rtau)
  local m, n = a._sz[1], a._sz[2]
  local A = columnMajor(ra, a)
  local tau = a.new():resize(min(m, n))
  failed('geqrf', backend.of(A).geqrf(A, tau), 'unexpected LAPACK error %d')
  return finish(A, ra), finish(tau, rtau)
end

local function reflectors(op, a, tau)
  check.tensorOf(op, tau, 'tau')
  check.sameType(op, a, tau)
  local k = min(a._sz[1], a._sz[2])
  if #tau._sz ~= 1 or tau._sz[1] > k then
    check.error(('%s: tau should be a vector of at most %d elements, got %s'):format(op, k, check.sizestr(tau)))
  end
  return tau:contiguous()
end

-- torch.orgqr([res,] A, tau): the m x n matrix Q of geqrf's reflectors (its first k columns)
local function orgqr(...)
  local rq, a, tau = withResults(1, 2, ...)
  input('orgqr', a, false, rq)
  tau = reflectors('orgqr', a, tau)
  local Q = columnMajor(rq, a)
  failed('orgqr', backend.of(Q).orgqr(Q, tau), 'unexpected LAPACK error %d')
  return finish(Q, rq)
end

-- torch.ormqr([res,] A, tau, C [, 'L'|'R' [, 'N'|'T']]): Q C, Q^T C, C Q or C Q^T
local function ormqr(...)
  local rc, a, tau, c, side, trans = withResults(1, 3, ...)
  input('ormqr', a, false, rc)
  matrix('ormqr', c, 'C')
  check.sameType('ormqr', a, c)
  tau = reflectors('ormqr', a, tau)
  side = option('ormqr', side, 'L', 'LR', 'side')
  trans = option('ormqr', trans, 'N', 'NT', 'trans')
  local m, n = c._sz[1], c._sz[2]
  local q = side == 'L' and m or n
  if a._sz[1] ~= q then
    check.error(('ormqr: A (%s) should have %d rows to multiply C (%s) from the %s'):format(
      check.sizestr(a), q, check.sizestr(c), side == 'L' and 'left' or 'right'))
  end
  local A = columnMajor(nil, a)
  local C = columnMajor(rc, c)
  failed('ormqr', backend.of(C).ormqr(A, tau, C, side, trans), 'unexpected LAPACK error %d')
  return finish(C, rc)
end

-- torch.qr([q, r,] A): the thin QR decomposition, Q m x k (column-major) and R k x n
local function qr(...)
  local rq, rr, a = withResults(2, 1, ...)
  input('qr', a, false, rq, rr)
  local m, n = a._sz[1], a._sz[2]
  local packed, tau = geqrf(a)
  rr = rr or a.new()
  torch.triu(rr, packed:narrow(1, 1, min(m, n)))
  rq = orgqr(rq or a.new(), packed, tau)
  rq._sz = { rq._sz[1], min(m, n) }   -- Q is its first k columns
  return rq, rr
end

local functions = {
  gesv = gesv, trtrs = trtrs, gels = gels, eig = eig, symeig = symeig, svd = svd,
  inverse = inverse, potrf = potrf, potrs = potrs, potri = potri, pstrf = pstrf,
  geqrf = geqrf, orgqr = orgqr, ormqr = ormqr, qr = qr,
}
for name, f in pairs(functions) do torch[name] = f end
