-- CUDA matrix products (argument forms of core.lua).
local C = require 'torch.backend.cuda.core'
local dispatcher = C.dispatcher
local check, apply, sizestr, call, Methods, functions = C.check, C.apply, C.sizestr, C.call, C.Methods, C.functions
local def = C.def

-- matrix products: r = beta * t + alpha * (a . b), as cuBLAS would through the array module

local products = {   -- dims of t, a, b; the size of t; batch: sum over the batch (addbmm)
  addmm = { 2, 2, 2, function(a, b) return { a._sz[1], b._sz[2] } end },
  addmv = { 1, 2, 1, function(a) return { a._sz[1] } end },
  addr = { 2, 1, 1, function(a, b) return { a._sz[1], b._sz[1] } end, outer = true },
  baddbmm = { 3, 3, 3, function(a, b) return { a._sz[1], a._sz[2], b._sz[3] } end },
  addbmm = { 2, 3, 3, function(a, b) return { a._sz[2], b._sz[3] } end, batch = true },
}

-- a and b as matmul operands (addr: a column and a row) after the size checks.
local function factors(op, p, a, b)
  if #a._sz ~= p[2] or #b._sz ~= p[3] then
    check.error(('%s: expected %dD and %dD factors, got %dD, %dD'):format(op, p[2], p[3], #a._sz, #b._sz))
  end
  if p.outer then return a:unsqueeze(2), b:unsqueeze(1) end
  local inner = p[2] == 3 and 3 or 2
  if p[2] == 3 and a._sz[1] ~= b._sz[1] then
    check.error(('%s: size mismatch, equal number of batches expected, %s and %s'):format(op, sizestr(a), sizestr(b)))
  end
  if a._sz[inner] ~= b._sz[inner - 1] then check.error(('%s: size mismatch, %s and %s'):format(op, sizestr(a), sizestr(b))) end
  return a, b
end

local function product(op, r, beta, t, alpha, a, b)
  local p = products[op]
  r = r or t.new()
  for _, x in ipairs { t, a, b } do check.sameType(op, r, x) end
  local fa, fb = factors(op, p, a, b)
  local want = p[4](a, b)
  if #t._sz ~= p[1] or not apply.sameSizes(t, { _sz = want }) then
    check.error(('%s: size mismatch, t: %s, expected %s'):format(op, sizestr(t), table.concat(want, 'x')))
  end
  if r == a or r == b then fa, fb = fa:clone(), fb:clone() end   -- resizing r must not move them
  r:resizeAs(t)
  call('gemm', r, beta, t, alpha, fa, fb, p.batch or false)
  return r
end

for op in pairs(products) do
  local body = function(r, beta, t, alpha, a, b) return product(op, r, beta, t, alpha, a, b) end
  Methods[op] = dispatcher(op, { { 'R =1 S n=1 T T', body }, { 'R n S n T T', body } }, true)
  functions[op] = dispatcher(op, { { 'r n=1 T n=1 T T', body } }, false)
end

-- mm, mv, bmm, ger: r = a . b, r resized
for name, op in pairs { mm = 'addmm', mv = 'addmv', bmm = 'baddbmm', ger = 'addr' } do
  def(name, { 'R T T', function(r, a, b)
    local p = products[op]
    r = r or a.new()
    check.sameType(name, r, a)
    check.sameType(name, r, b)
    local fa, fb = factors(name, p, a, b)
    if r == a or r == b then fa, fb = fa:clone(), fb:clone() end
    r:resize(p[4](a, b))
    call('gemm', r, 0, nil, 1, fa, fb, false)
    return r
  end })
end
