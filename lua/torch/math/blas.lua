-- Matrix and vector products, torch7's mv mm bmm ger dot and addmv addmm addbmm baddbmm addr:
-- Float and Double through BLAS (numpy's library, via the FFI), the integer types through loops.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local blas = require 'torch.backend.cpu.blas'

local max = math.max
local sizestr = check.sizestr
local ptr = apply.ptr
local scaleKernel = apply.kernel(1, '$1 = $1 * v1')

local function notHalf(op, t)
  if t._dt.half then check.error(op .. ': not supported for torch.HalfTensor') end
end

-- r = beta * r, where beta == 0 clears r (NaN included), as BLAS does.
local function scale(r, beta)
  if beta == 0 then r:zero() elseif beta ~= 1 then scaleKernel(r, beta) end
end

-- Whether two tensors' memory ranges meet (then an input must be copied before r is written).
local function extent(t)
  if not t._st or apply.numel(t) == 0 then return nil end
  local lo, hi = t._off, t._off
  for d = 1, #t._sz do
    local reach = (t._sz[d] - 1) * t._str[d]
    if reach > 0 then hi = hi + reach else lo = lo + reach end
  end
  local base = tonumber(ffi.cast('uintptr_t', t._st._ptr))
  local size = t._dt.size
  return base + lo * size, base + (hi + 1) * size
end

local function overlaps(a, b)
  local alo, ahi = extent(a)
  local blo, bhi = extent(b)
  return alo ~= nil and blo ~= nil and alo < bhi and blo < ahi
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
-- the three kernels, for any element type; operands are checked and do not overlap r

local function gemm(r, beta, alpha, a, b)
  local m, n, k = a._sz[1], b._sz[2], a._sz[2]
  if m == 0 or n == 0 then return end
  if k == 0 then return scale(r, beta) end
  if r._dt.integer then gemmLoop(r, beta, alpha, a, b, m, n, k)
  else gemmBlas(r, beta, alpha, a, b, m, n, k) end
end

local function gemv(r, beta, alpha, mat, vec)
  local m, n = mat._sz[1], mat._sz[2]
  if m == 0 then return end
  if n == 0 then return scale(r, beta) end
  if r._dt.integer then gemvLoop(r, beta, alpha, mat, vec, m, n)
  else gemvBlas(r, beta, alpha, mat, vec, m, n) end
end

local function ger(r, beta, alpha, x, y)
  local m, n = x._sz[1], y._sz[1]
  if m == 0 or n == 0 then return end
  if r._dt.integer then gerLoop(r, beta, alpha, x, y, m, n)
  else gerBlas(r, beta, alpha, x, y, m, n) end
end

-- A reusable view of t's slice i along dim 1 (its offset moves; no table per batch).
local function slicer(t)
  local v = t:select(1, 1)
  local off0, step = t._off, t._str[1]
  return function(i) v._off = off0 + (i - 1) * step; return v end
end

------------------------------------------------------------------------------------------------
-- the operations: argument dims, size checks and the computation (r already holds beta * t's
-- values where beta ~= 0)

local function dimsError(op, want, ...)
  local got = {}
  for i, t in ipairs({ ... }) do got[i] = #t._sz .. 'D' end
  check.error(('%s: expected %s, got %s'):format(op, want, table.concat(got, ', ')))
end

local ops = {}

ops.addmv = {
  dims = { 1, 2, 1 },
  sizes = function(t, mat, vec)
    if mat._sz[2] ~= vec._sz[1] then return ('%s and %s'):format(sizestr(mat), sizestr(vec)) end
    if t._sz[1] ~= mat._sz[1] then return ('t: %s, mat: %s'):format(sizestr(t), sizestr(mat)) end
  end,
  run = gemv,
}

ops.addmm = {
  dims = { 2, 2, 2 },
  sizes = function(t, a, b)
    if a._sz[2] ~= b._sz[1] then return ('%s and %s'):format(sizestr(a), sizestr(b)) end
    if t._sz[1] ~= a._sz[1] or t._sz[2] ~= b._sz[2] then
      return ('t: %s, m1: %s, m2: %s'):format(sizestr(t), sizestr(a), sizestr(b))
    end
  end,
  run = gemm,
}

ops.addr = {
  dims = { 2, 1, 1 },
  sizes = function(t, x, y)
    if t._sz[1] ~= x._sz[1] or t._sz[2] ~= y._sz[1] then
      return ('t: %s, vec1: %s, vec2: %s'):format(sizestr(t), sizestr(x), sizestr(y))
    end
  end,
  run = ger,
}

local function batchSizes(t, b1, b2, tsizes)
  if b1._sz[1] ~= b2._sz[1] then
    return ('equal number of batches expected, %s and %s'):format(sizestr(b1), sizestr(b2))
  end
  if b1._sz[3] ~= b2._sz[2] then return ('%s and %s'):format(sizestr(b1), sizestr(b2)) end
  for d = 1, #tsizes do
    if t._sz[d] ~= tsizes[d] then
      return ('t: %s, batch1: %s, batch2: %s'):format(sizestr(t), sizestr(b1), sizestr(b2))
    end
  end
end

ops.addbmm = {
  dims = { 2, 3, 3 },
  sizes = function(t, b1, b2) return batchSizes(t, b1, b2, { b1._sz[2], b2._sz[3] }) end,
  run = function(r, beta, alpha, b1, b2)
    local n = b1._sz[1]
    if n == 0 then return scale(r, beta) end
    local m1, m2 = slicer(b1), slicer(b2)
    for i = 1, n do
      gemm(r, i == 1 and beta or 1, alpha, m1(i), m2(i))
    end
  end,
}

ops.baddbmm = {
  dims = { 3, 3, 3 },
  sizes = function(t, b1, b2) return batchSizes(t, b1, b2, { b1._sz[1], b1._sz[2], b2._sz[3] }) end,
  run = function(r, beta, alpha, b1, b2)
    if b1._sz[1] == 0 then return end
    local rs, m1, m2 = slicer(r), slicer(b1), slicer(b2)
    for i = 1, b1._sz[1] do gemm(rs(i), beta, alpha, m1(i), m2(i)) end
  end,
}

local function checkOperands(op, spec, r, t, a, b)
  local ts = { r or t, t, a, b }
  local names = { 'result', 't', 'first factor', 'second factor' }
  for i = 1, 4 do check.tensorOf(op, ts[i], names[i]) end
  for i = 2, 4 do check.sameType(op, ts[1], ts[i]) end
  notHalf(op, t)
  local d = spec.dims
  if #t._sz ~= d[1] or #a._sz ~= d[2] or #b._sz ~= d[3] then
    dimsError(op, ('%dD, %dD, %dD tensors'):format(d[1], d[2], d[3]), t, a, b)
  end
  local bad = spec.sizes(t, a, b)
  if bad then check.error(op .. ': size mismatch, ' .. bad) end
end

-- r = beta * t + alpha * (a . b), after every check; inputs that share memory with r are copied.
local function compute(op, r, beta, t, alpha, a, b)
  local spec = ops[op]
  check.number(op, beta, 'beta')
  check.number(op, alpha, 'alpha')
  checkOperands(op, spec, r, t, a, b)
  if overlaps(r, a) then a = a:clone() end
  if overlaps(r, b) then b = b:clone() end
  if r ~= t then
    if overlaps(r, t) then t = t:clone() end
    r:resizeAs(t)
    if beta ~= 0 then r:copy(t) end
  end
  spec.run(r, beta, alpha, a, b)
  return r
end

-- Argument patterns before the two factors (T tensor, n number) and what they are.
local functionForms = {
  T = { 't' }, TT = { 'r', 't' }, nT = { 'beta', 't' }, Tn = { 't', 'alpha' },
  nTn = { 'beta', 't', 'alpha' }, TnT = { 'r', 'beta', 't' }, TTn = { 'r', 't', 'alpha' },
  TnTn = { 'r', 'beta', 't', 'alpha' },
}
local methodForms = {
  [''] = {}, T = { 't' }, n = { 'alpha' }, Tn = { 't', 'alpha' }, nn = { 'beta', 'alpha' },
  nTn = { 'beta', 't', 'alpha' },
}

local function parse(op, forms, n, args, usage)
  local sig = {}
  for i = 1, n - 2 do
    local x = args[i]
    sig[i] = type(x) == 'number' and 'n' or (torch.isTensor(x) and 'T' or '?')
  end
  local names = forms[table.concat(sig)]
  if not names or n < 2 then check.error(('%s: bad arguments, expected %s'):format(op, usage)) end
  local v = {}
  for i, name in ipairs(names) do v[name] = args[i] end
  return v, args[n - 1], args[n]
end

for op in pairs(ops) do
  local fusage = ('torch.%s([res,] [beta,] t, [alpha,] a, b)'):format(op)
  local musage = ('res:%s([beta,] [t,] [alpha,] a, b)'):format(op)
  torch._method(op, function(self, ...)
    local n = select('#', ...)
    local v, a, b = parse(op, methodForms, n, { ... }, musage)
    return compute(op, self, v.beta or 1, v.t or self, v.alpha or 1, a, b)
  end)
  torch[op] = function(...)
    local n = select('#', ...)
    local v, a, b = parse(op, functionForms, n, { ... }, fusage)
    check.tensorOf(op, v.t, 't')
    return compute(op, v.r or v.t.new(), v.beta or 1, v.t, v.alpha or 1, a, b)
  end
end

------------------------------------------------------------------------------------------------
-- mv mm bmm ger: res = a . b, res resized

local products = {
  mv = { op = 'addmv', dims = { 2, 1 }, size = function(a) return { a._sz[1] } end },
  mm = { op = 'addmm', dims = { 2, 2 }, size = function(a, b) return { a._sz[1], b._sz[2] } end },
  bmm = { op = 'baddbmm', dims = { 3, 3 }, size = function(a, b) return { a._sz[1], a._sz[2], b._sz[3] } end },
  ger = { op = 'addr', dims = { 1, 1 }, size = function(a, b) return { a._sz[1], b._sz[1] } end },
}

for name, p in pairs(products) do
  local spec = ops[p.op]
  local function product(r, a, b)
    check.tensorOf(name, r, 'result')
    check.tensorOf(name, a, 'first factor')
    check.tensorOf(name, b, 'second factor')
    check.sameType(name, r, a)
    check.sameType(name, r, b)
    notHalf(name, r)
    if #a._sz ~= p.dims[1] or #b._sz ~= p.dims[2] then
      dimsError(name, ('%dD and %dD tensors'):format(p.dims[1], p.dims[2]), a, b)
    end
    local shaped = { _sz = p.size(a, b) }
    local bad = spec.sizes(shaped, a, b)
    if bad then check.error(name .. ': size mismatch, ' .. bad) end
    if overlaps(r, a) then a = a:clone() end
    if overlaps(r, b) then b = b:clone() end
    r:resize(shaped._sz)
    spec.run(r, 0, 1, a, b)
    return r
  end
  torch._method(name, product)
  torch[name] = function(r, a, b)
    if b == nil then r, a, b = nil, r, a end
    check.tensorOf(name, a, 'first factor')
    r = r or a.new()
    check.tensorOf(name, r, 'result')
    return r[name](r, a, b)
  end
end

------------------------------------------------------------------------------------------------
-- dot: the sum of products of two tensors' elements in row-major order (any shapes)

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

local function dot(a, b)
  check.tensorOf('dot', a)
  check.tensorOf('dot', b)
  check.sameType('dot', a, b)
  check.sameElements('dot', a, b)
  local n = apply.numel(a)
  if n == 0 then return 0 end
  local x, ix = flat(a)
  local y, iy = flat(b)
  notHalf('dot', a)
  if a._dt.integer then return dotLoops[a._dt](n, ptr(x), ix, ptr(y), iy) end
  return blas.dot(a._dt, n, ptr(x), ix, ptr(y), iy)
end
torch._method('dot', dot)
torch.dot = dot

return { overlaps = overlaps }
