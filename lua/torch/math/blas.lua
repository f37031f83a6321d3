-- Matrix and vector products, torch7's mv mm bmm ger dot and addmv addmm addbmm baddbmm addr:
-- the one front end for every device. Arguments are parsed and checked here, the result sized,
-- then one op of the result's backend computes: gemm (backend/cpu/products.lua: numpy's OpenBLAS
-- through the FFI; backend/cuda/products.lua: the array module), or dot.
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local apply = require 'torch.core.apply'

local sizestr = check.sizestr

local function notHalf(op, t)
  if t._dt.half then check.error(op .. ': not supported for torch.HalfTensor') end
end

-- The memory t's elements span: an address space (0 for host memory, a CUDA buffer's id) and
-- a byte range in it; nil for an empty tensor.
local function extent(t)
  local st = t._st
  if not st or apply.numel(t) == 0 then return nil end
  local lo, hi = t._off, t._off
  for d = 1, #t._sz do
    local reach = (t._sz[d] - 1) * t._str[d]
    if reach > 0 then hi = hi + reach else lo = lo + reach end
  end
  local size = t._dt.size
  if t._device then return st._id, (st._baseoff + lo) * size, (st._baseoff + hi + 1) * size end
  local base = tonumber(ffi.cast('uintptr_t', st._ptr))
  return 0, base + lo * size, base + (hi + 1) * size
end

-- Whether two tensors' memory ranges meet (then an input must be copied before r is written).
local function overlaps(a, b)
  local aspace, alo, ahi = extent(a)
  local bspace, blo, bhi = extent(b)
  return aspace ~= nil and aspace == bspace and alo < bhi and blo < ahi
end

------------------------------------------------------------------------------------------------
-- the operations: argument dims and size checks; batchSum: the products of the batches summed

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
}

ops.addmm = {
  dims = { 2, 2, 2 },
  sizes = function(t, a, b)
    if a._sz[2] ~= b._sz[1] then return ('%s and %s'):format(sizestr(a), sizestr(b)) end
    if t._sz[1] ~= a._sz[1] or t._sz[2] ~= b._sz[2] then
      return ('t: %s, m1: %s, m2: %s'):format(sizestr(t), sizestr(a), sizestr(b))
    end
  end,
}

ops.addr = {
  dims = { 2, 1, 1 },
  sizes = function(t, x, y)
    if t._sz[1] ~= x._sz[1] or t._sz[2] ~= y._sz[1] then
      return ('t: %s, vec1: %s, vec2: %s'):format(sizestr(t), sizestr(x), sizestr(y))
    end
  end,
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
  batchSum = true,
}

ops.baddbmm = {
  dims = { 3, 3, 3 },
  sizes = function(t, b1, b2) return batchSizes(t, b1, b2, { b1._sz[1], b1._sz[2], b2._sz[3] }) end,
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

-- r = beta * t + alpha * (a . b), after every check; inputs that share memory with r are copied
-- (before r is resized: they may be r).
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
  end
  backend.of(r).gemm(r, beta, t, alpha, a, b, spec.batchSum)
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
    backend.of(r).gemm(r, 0, r, 1, a, b, false)
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

local function dot(a, b)
  check.tensorOf('dot', a)
  check.tensorOf('dot', b)
  check.sameType('dot', a, b)
  check.sameElements('dot', a, b)
  notHalf('dot', a)
  return backend.of(a).dot(a, b)
end
torch._method('dot', dot)
torch.dot = dot

return { overlaps = overlaps }
