-- The CPU kernel of torch.conv2/xcorr2/conv3/xcorr3 (math/conv.lua reduces all of them to it):
-- valid 3D cross-correlations of contiguous volumes.
local apply = require 'torch.backend.cpu.apply'
local backend = require 'torch.backend'

local ptr = apply.ptr

-- out (od x or x oc) += valid cross-correlation of input (id x ir x ic) with kernel (kd x kr x kc);
-- pointers to contiguous data. The innermost loop runs along an output row.
local xcorrLoops = apply.perType('xcorr', [[
return function(po, pi, id, ir, ic, pk, kd, kr, kc)
  local od, orows, oc = id - kd + 1, ir - kr + 1, ic - kc + 1
  for z = 0, od - 1 do
    for a = 0, kd - 1 do
      for y = 0, orows - 1 do
        local orow = (z * orows + y) * oc
        for b = 0, kr - 1 do
          local irow = ((z + a) * ir + y + b) * ic
          local krow = (a * kr + b) * kc
          for c = 0, kc - 1 do
            local w, base = pk[krow + c], irow + c
            for x = 0, oc - 1 do po[orow + x] = po[orow + x] + w * pi[base + x] end
          end
        end
      end
    end
  end
end]])

backend.register('cpu', {
  -- r (n x od x or x oc, zeroed) += the valid cross-correlations of x (planes x id x ir x ic)
  -- with k (n x kplanes x kd x kr x kc), all contiguous. kind: 'single' (one plane, one kernel),
  -- 'planes' (plane q with kernel q), 'sum' (r[q] = sum over planes p of x[p] with k[q][p]).
  xcorr3 = function(r, x, k, kind)
    local loop = xcorrLoops[x._dt]
    local id, ir, ic = x._sz[2], x._sz[3], x._sz[4]
    local kd, kr, kc = k._sz[3], k._sz[4], k._sz[5]
    for q = 1, r._sz[1] do
      local o = r:select(1, q)
      local first, last = 1, x._sz[1]
      if kind == 'planes' then first, last = q, q end
      for p = first, last do
        local kq = k:select(1, q):select(1, kind == 'sum' and p or 1)
        loop(ptr(o), ptr(x:select(1, p)), id, ir, ic, ptr(kq), kd, kr, kc)
      end
    end
  end,
})
