-- The CPU op table's products: gemm (matrix . matrix, matrix . vector, vector (x) vector, and
-- batches of them) and dot. Float and Double run in BLAS (backend/cpu/blas.lua: numpy's
-- OpenBLAS through the FFI, threads chosen per call), the integer types in Lua loops.
-- Operands are checked by the front end (math/blas.lua) and do not share memory with r.
local apply = require 'torch.backend.cpu.apply'
local blas = require 'torch.backend.cpu.blas'

local max = math.max
local ptr = apply.ptr
local scaleKernel = apply.kernel(1, '$1 = $1 * v1')

-- r = beta * r, where beta == 0 clears r (NaN included), as BLAS does.
local function scale(r, beta)
  if beta == 0 then r:zero() elseif beta ~= 1 then scaleKernel(r, beta) end
end

------------------------------------------------------------------------------------------------
-- Float / Double through BLAS (column-major)

-- How BLAS can read a rows x cols matrix in place: trans = false (column-major) or true
-- (row-major, i.e. BLAS sees the transpose), with its leading dimension; nil if it cannot.
local function layout(t, rows, cols)
  local s1, s2 = t._str[1], t._str[2]
  if (rows == 1 or s1 == 1) and (cols == 1 or s2 >= max(1, rows)) then
    return false, cols == 1 and max(1, rows) or s2
  end
  if (cols == 1 or s2 == 1) and (rows == 1 or s1 >= max(1, cols)) then
    return true, rows == 1 and max(1, cols) or s1
  end
end

-- An operand as BLAS reads it: the tensor (a contiguous copy when needed), trans, ld.
local function operand(t, rows, cols)
  local trans, ld = layout(t, rows, cols)
  if trans == nil then return t:contiguous(), true, max(1, cols) end
  return t, trans, ld
end

-- A vector and its increment (> 0, as BLAS needs).
local function vector(t)
  local inc = t._sz[1] == 1 and 1 or t._str[1]
  if inc <= 0 then return t:contiguous(), 1 end
  return t, inc
end

-- r (m x n) = beta * r + alpha * a (m x k) * b (k x n)
local function gemmBlas(r, beta, alpha, a, b, m, n, k)
  local c, ct, ldc = operand(r, m, n)   -- written in place, or in a copy put back after
  local a_, ta, lda = operand(a, m, k)
  local b_, tb, ldb = operand(b, k, n)
  if ct then   -- BLAS sees c^T = b^T a^T
    blas.gemm(r._dt, not tb, not ta, n, m, k, alpha, ptr(b_), ldb, ptr(a_), lda, beta, ptr(c), ldc)
  else
    blas.gemm(r._dt, ta, tb, m, n, k, alpha, ptr(a_), lda, ptr(b_), ldb, beta, ptr(c), ldc)
  end
  if c ~= r then r:copy(c) end
end

-- r (m) = beta * r + alpha * mat (m x n) * vec (n)
local function gemvBlas(r, beta, alpha, mat, vec, m, n)
  local a, trans, lda = operand(mat, m, n)
  local x, incx = vector(vec)
  local y, incy = vector(r)
  if trans then m, n = n, m end   -- BLAS sees mat^T, column-major n x m
  blas.gemv(r._dt, trans, m, n, alpha, ptr(a), lda, ptr(x), incx, beta, ptr(y), incy)
  if y ~= r then r:copy(y) end
end

-- r (m x n) = beta * r + alpha * x y^T
local function gerBlas(r, beta, alpha, x, y, m, n)
  scale(r, beta)
  local c, ct, ldc = operand(r, m, n)
  local x_, incx = vector(x)
  local y_, incy = vector(y)
  if ct then
    blas.ger(r._dt, n, m, alpha, ptr(y_), incy, ptr(x_), incx, ptr(c), ldc)
  else
    blas.ger(r._dt, m, n, alpha, ptr(x_), incx, ptr(y_), incy, ptr(c), ldc)
  end
  if c ~= r then r:copy(c) end
end

------------------------------------------------------------------------------------------------
-- integer types: one strided loop, compiled per element type (Long computes in int64)

local loops = apply.perType('gemm', [[
return function(m, n, k, alpha, pa, as1, as2, pb, bs1, bs2, beta, pr, rs1, rs2)
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local s = 0
      for l = 0, k - 1 do s = s + pa[i * as1 + l * as2] * pb[l * bs1 + j * bs2] end
      local o = i * rs1 + j * rs2
      if beta == 0 then pr[o] = alpha * s else pr[o] = beta * pr[o] + alpha * s end
    end
  end
end]])

-- r = beta * r + alpha * a * b, on (pointer, stride1, stride2) operands
local function gemmLoop(r, beta, alpha, a, b, m, n, k)
  loops[r._dt](m, n, k, alpha, ptr(a), a._str[1], a._str[2], ptr(b), b._str[1], b._str[2],
    beta, ptr(r), r._str[1], r._str[2])
end

local function gemvLoop(r, beta, alpha, mat, vec, m, n)
  loops[r._dt](m, 1, n, alpha, ptr(mat), mat._str[1], mat._str[2], ptr(vec), vec._str[1], 0,
    beta, ptr(r), r._str[1], 0)
end

local function gerLoop(r, beta, alpha, x, y, m, n)
  loops[r._dt](m, n, 1, alpha, ptr(x), x._str[1], 0, ptr(y), 0, y._str[1], beta, ptr(r), r._str[1], r._str[2])
end

------------------------------------------------------------------------------------------------
-- one product, any element type

local function mm(r, beta, alpha, a, b)
  local m, n, k = a._sz[1], b._sz[2], a._sz[2]
  if m == 0 or n == 0 then return end
  if k == 0 then return scale(r, beta) end
  if r._dt.integer then gemmLoop(r, beta, alpha, a, b, m, n, k)
  else gemmBlas(r, beta, alpha, a, b, m, n, k) end
end

local function mv(r, beta, alpha, mat, vec)
  local m, n = mat._sz[1], mat._sz[2]
  if m == 0 then return end
  if n == 0 then return scale(r, beta) end
  if r._dt.integer then gemvLoop(r, beta, alpha, mat, vec, m, n)
  else gemvBlas(r, beta, alpha, mat, vec, m, n) end
end

local function outer(r, beta, alpha, x, y)
  local m, n = x._sz[1], y._sz[1]
  if m == 0 or n == 0 then return end
  if r._dt.integer then gerLoop(r, beta, alpha, x, y, m, n)
  else gerBlas(r, beta, alpha, x, y, m, n) end
end

-- A reusable view of t's slice i along dim 1 (its offset moves; no table per batch); a matrix
-- is the same factor for every batch.
local function slicer(t)
  if #t._sz == 2 then return function() return t end end
  local v = t:select(1, 1)
  local off0, step = t._off, t._str[1]
  return function(i) v._off = off0 + (i - 1) * step; return v end
end

------------------------------------------------------------------------------------------------
-- the ops

-- r = beta * m + alpha * a . b: a, b matrices (r a matrix), a matrix and a vector (r a vector),
-- two vectors (r a matrix: the outer product), or batches (3D a and/or b, the other a matrix
-- used for every batch): r the batch of products, or with batchSum r a matrix, their sum.
-- m is not read when beta is 0.
local function gemm(r, beta, m, alpha, a, b, batchSum)
  if beta ~= 0 and m ~= r then r:copy(m) end
  local na, nb = #a._sz, #b._sz
  if na == 2 and nb == 2 then return mm(r, beta, alpha, a, b) end
  if nb == 1 then
    if na == 1 then return outer(r, beta, alpha, a, b) end
    return mv(r, beta, alpha, a, b)
  end
  local batches = na == 3 and a._sz[1] or b._sz[1]
  local as, bs = slicer(a), slicer(b)
  if batchSum then
    if batches == 0 then return scale(r, beta) end
    for i = 1, batches do mm(r, i == 1 and beta or 1, alpha, as(i), bs(i)) end
  else
    local rs = slicer(r)
    for i = 1, batches do mm(rs(i), beta, alpha, as(i), bs(i)) end
  end
end

local dotLoops = apply.perType('dot', [[
return function(n, px, ix, py, iy)
  local s = 0
  for i = 0, n - 1 do s = s + px[i * ix] * py[i * iy] end
  return tonumber(s)
end]])

-- t as a flat run: the tensor (contiguous copy if needed) and its element step
local function flat(t)
  if #t._sz == 1 then return vector(t) end
  return t:contiguous(), 1
end

-- The sum of the products of a's and b's elements in row-major order (same element counts).
local function dot(a, b)
  local n = apply.numel(a)
  if n == 0 then return 0 end
  local x, ix = flat(a)
  local y, iy = flat(b)
  if a._dt.integer then return dotLoops[a._dt](n, ptr(x), ix, ptr(y), iy) end
  return blas.dot(a._dt, n, ptr(x), ix, ptr(y), iy)
end

require('torch.backend').register('cpu', {
  gemm = gemm, dot = dot,
  -- the threads the products may use (torch.setnumthreads, torch.getnumthreads; blas.lua's rule
  -- takes fewer for small ones) and the machine's online CPUs (torch.getnumcores)
  set_threads = blas.setThreads,
  threads = function() return blas.threads end,
  cpus = function() return blas.cpus end,
  -- the thread count for a pass of `work` units, at least `least` a thread, run by a pool other
  -- than OpenBLAS's (blas.threadsFor's rule: torch.setnumthreads, never more than the free CPUs,
  -- OpenBLAS's spinning workers counted busy)
  threads_for = function(work, least) return blas.threadsFor(work, least, true) end,
})
