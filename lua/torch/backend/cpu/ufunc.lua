-- numpy's compiled ufunc inner loops (SIMD), called through the FFI on tensor memory.
-- luabridge/backend/ufuncs.py says once per (ufunc, signature) where numpy's loop is; a call then is
-- loop(args, dimensions, steps, data) as numpy itself makes it, with no Python on the way.
-- Callers pass checked pointers: n elements each, at byte steps (0 for a scalar operand).
local ffi = require 'ffi'
local memory = require 'torch.core.memory'

ffi.cdef [[
typedef void (*luabridge_ufunc_loop)(char **args, const intptr_t *dims, const intptr_t *steps, void *data);
]]

local ufunc = {}
local charp = ffi.typeof('char *')
local args = ffi.new('char *[4]')
local dims = ffi.new('intptr_t[1]')
local steps = ffi.new('intptr_t[4]')

local loops = {}

-- The loop of numpy's ufunc `name` for `signature` (numpy's notation: 'f->f', 'ff->?'), or
-- false where numpy lends none.
function ufunc.loop(name, signature)
  local key = name .. ' ' .. signature
  local l = loops[key]
  if l == nil then
    local fhi, flo, dhi, dlo = memory.py.ufunc_loop(name, signature)
    l = fhi ~= nil and { fn = ffi.cast('luabridge_ufunc_loop', memory.address(fhi, flo)),
                         data = memory.address(dhi, dlo) } or false
    loops[key] = l
  end
  return l
end

-- out[i] = f(a[i])
function ufunc.unary(l, n, pa, sa, pout, sout)
  args[0], args[1] = ffi.cast(charp, pa), ffi.cast(charp, pout)
  dims[0], steps[0], steps[1] = n, sa, sout
  l.fn(args, dims, steps, l.data)
end

-- out[i] = f(a[i], b[i])
function ufunc.binary(l, n, pa, sa, pb, sb, pout, sout)
  args[0], args[1], args[2] = ffi.cast(charp, pa), ffi.cast(charp, pb), ffi.cast(charp, pout)
  dims[0], steps[0], steps[1], steps[2] = n, sa, sb, sout
  l.fn(args, dims, steps, l.data)
end

-- acc[0] = f(... f(f(acc[0], a[0]), a[1]) ..., a[n-1]): a binary loop in numpy's reduce mode
-- (the accumulator is first operand and output, both at step 0), as numpy's own ufunc.reduce
-- calls it; add sums pairwise there, maximum/minimum run SIMD and let a NaN win.
function ufunc.reduce(l, n, pa, sa, acc)
  local pacc = ffi.cast(charp, acc)
  args[0], args[1], args[2] = pacc, ffi.cast(charp, pa), pacc
  dims[0], steps[0], steps[1], steps[2] = n, 0, sa, 0
  l.fn(args, dims, steps, l.data)
end

-- numpy's loops for code outside the CPU backend that runs them on CPU memory it holds (the
-- executor's fused groups, torch.File's NaN check), through the op table.
require('torch.backend').register('cpu', {
  ufunc_loop = ufunc.loop, ufunc_unary = ufunc.unary, ufunc_binary = ufunc.binary, ufunc_reduce = ufunc.reduce,
})

return ufunc
