-- The CPU ops of the constructors (math/construct.lua checks the arguments and sizes results).
local apply = require 'torch.backend.cpu.apply'
local backend = require 'torch.backend'

-- The n elements p[0..n-1] of each sequence, from its two parameters.
local sequences = {
  range = function(p, n, first, step)
    for i = 0, n - 1 do p[i] = first + i * step end
  end,
  linspace = function(p, n, a, b)
    if n == 1 then p[0] = a; return end
    for i = 0, n - 1 do p[i] = a + i * (b - a) / (n - 1) end
  end,
  logspace = function(p, n, a, b)
    if n == 1 then p[0] = 10 ^ a; return end
    for i = 0, n - 1 do p[i] = 10 ^ (a + i * (b - a) / (n - 1)) end
  end,
}

local mul = apply.kernel(3, '$1 = $2 * $3')
local subMul = apply.kernel(3, '$1 = $1 - $2 * $3')

backend.register('cpu', {
  -- r (a contiguous DoubleTensor) = the sequence `name` (range, linspace, logspace) of its size
  sequence = function(name, r, a, b) sequences[name](r._st._ptr + r._off, r._sz[1], a, b) end,

  -- r = the cross products of a and b along dim (of size 3); r shares no memory with a or b
  cross = function(r, a, b, dim)
    for i = 1, 3 do
      local j, k = i % 3 + 1, (i + 1) % 3 + 1
      local ri = r:narrow(dim, i, 1)
      mul(ri, a:narrow(dim, j, 1), b:narrow(dim, k, 1))
      subMul(ri, a:narrow(dim, k, 1), b:narrow(dim, j, 1))
    end
  end,
})
