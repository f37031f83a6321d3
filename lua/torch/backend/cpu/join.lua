-- The CPU op of histc and bhistc (math/join.lua checks the arguments and picks the range).
local apply = require 'torch.backend.cpu.apply'
local backend = require 'torch.backend'
local foldRuns = require('torch.backend.cpu.reduce').foldRuns

-- Adds the run's counts into h (double[nbins]); values outside [lo, hi] are not counted.
local HISTOGRAM = apply.perType('histogram', [[
local floor = math.floor
return function(p, n, s, h, lo, hi, nbins)
  local w, q = hi - lo, 0
  for _ = 1, n do
    local v = p[q]
    if v >= lo and v <= hi then
      local b = floor((v - lo) / w * nbins)
      if b >= nbins then b = nbins - 1 end
      h[b] = h[b] + 1
    end
    q = q + s
  end
end]])

backend.register('cpu', {
  -- h (a zeroed contiguous DoubleTensor of nbins) += the counts of x's elements in nbins equal
  -- bins over [lo, hi]; h of rows x nbins: one histogram per row of the matrix x.
  histc = function(h, x, lo, hi)
    local f, hp = HISTOGRAM[x._dt], h._st._ptr + h._off
    local nbins = h._sz[#h._sz]
    if #h._sz == 1 then
      foldRuns(x, function(p, n, s) f(p, n, s, hp, lo, hi, nbins) end)
      return
    end
    local rows, m, xp = x._sz[1], x._sz[2], x._st._ptr + x._off
    for i = 0, rows - 1 do f(xp + i * x._str[1], m, x._str[2], hp + i * nbins, lo, hi, nbins) end
  end,
})
