-- CUDA reductions (argument forms of core.lua).
local C = require 'torch.backend.cuda.core'
local sortedOut = C.sortedOut
local torch, check, apply, make, numel, call = C.torch, C.check, C.apply, C.make, C.numel, C.call
local copyArray, dtypes, def, floatOnly, sized, withSize = C.copyArray, C.dtypes, C.def, C.floatOnly, C.sized, C.withSize

-- reductions: over all elements (a number) or along a dim (kept with size 1)

local function reduction(name, allForm, dimForm, opts)
  def(name,
    { allForm, function(s, p)
      if opts.float then floatOnly(name, s) end
      if opts.byte and s._dt ~= dtypes.Byte then
        check.error(('%s: expected a torch.CudaByteTensor, got %s'):format(name, torch.typename(s)))
      end
      return call('reduce_all', name, s, p)
    end },
    dimForm and { dimForm, function(r, s, d, p)
      if opts.pFirst then d, p = p, d end   -- norm(p, dim)
      if opts.float then floatOnly(name, s) end
      check.dim(name, s, d)
      r = sized(name, r, s, withSize(s, d, 1))
      call('reduce_dim', name, r, s, d - 1, p)
      return r
    end } or nil)
end

reduction('sum', 'S', 'r S n', {})
reduction('prod', 'S', 'r S n', {})
reduction('mean', 'S', 'r S n', { float = true })
reduction('var', 'S b=false', 'r S n b=false', { float = true })
reduction('std', 'S b=false', 'r S n b=false', { float = true })
reduction('all', 'S', nil, { byte = true })
reduction('any', 'S', nil, { byte = true })
reduction('norm', 'S n=2', 'r S n n', { float = true, pFirst = true })

-- max / min: the element, or values and CudaLongTensor indices along a dim
for _, name in ipairs { 'max', 'min' } do
  def(name,
    { 'S', function(s)
      if numel(s) == 0 then check.error(name .. ': the tensor has no elements') end
      return call('reduce_all', name, s, nil)
    end },
    { 'r r S n', function(r, idx, s, d)
      check.dim(name, s, d)
      if s._sz[d] == 0 then check.error(('%s: cannot reduce dimension %d of size 0'):format(name, d)) end
      r, idx = sortedOut(name, r, idx, s, withSize(s, d, 1))
      call('argreduce', name, r, idx, s, d - 1)
      return r, idx
    end })
end

for _, name in ipairs { 'cumsum', 'cumprod' } do
  def(name, { 'r S n=1', function(r, s, d)
    check.dim(name, s, d)
    r = sized(name, r, s, copyArray(s._sz))
    call('scan', name, r, s, d - 1)
    return r
  end })
end

def('dot', { 'S T', function(a, b)
  check.sameType('dot', a, b)
  check.sameElements('dot', a, b)
  return call('dot', a, b)
end })

def('dist', { 'S T n=2', function(a, b, p)
  floatOnly('dist', a)
  check.sameType('dist', a, b)
  check.sameElements('dist', a, b)
  return a:clone():add(-1, b):norm(p)
end })

def('equal', { 'S T', function(a, b)
  check.sameType('equal', a, b)
  return apply.sameSizes(a, b) and call('equal', a, b)
end })

def('trace', { 'S', function(s)
  if #s._sz ~= 2 then check.error('trace: expected a 2D tensor, got ' .. #s._sz .. 'D') end
  local n = math.min(s._sz[1], s._sz[2])
  if n == 0 then return 0 end
  return make(getmetatable(s), s._st, s._off, { n }, { s._str[1] + s._str[2] }):sum()
end })
