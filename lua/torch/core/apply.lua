-- Walks over strided tensors that read only sizes, strides and offsets (no element memory):
-- contiguity, element counts, same-size tests, and the 0-based element offsets of slices and
-- elements, for any device. The CPU loops over element memory are backend/cpu/apply.lua's.
local apply = {}

-- Tensors of up to 2 dims (most calls) take loop-free paths: a short loop run on every call of
-- an op gets hot on its own, and LuaJIT then blacklists it and the traces of its callers.
function apply.isContiguous(t)
  local sz, st = t._sz, t._str
  local nd = #sz
  if nd == 1 then return sz[1] == 1 or st[1] == 1 end
  if nd == 2 then return (sz[2] == 1 or st[2] == 1) and (sz[1] == 1 or st[1] == sz[2]) end
  local z = 1
  for d = nd, 1, -1 do
    local s = sz[d]
    if s ~= 1 then
      if st[d] ~= z then return false end
      z = z * s
    end
  end
  return true
end

local function numel(t)
  local sz = t._sz
  local nd = #sz
  if nd == 1 then return sz[1] end
  if nd == 2 then return sz[1] * sz[2] end
  local n = 1
  for d = 1, nd do n = n * sz[d] end
  return nd == 0 and 0 or n
end
apply.numel = numel

local function sameSizes(a, b)
  local x, y = a._sz, b._sz
  local nd = #x
  if nd ~= #y then return false end
  if nd == 1 then return x[1] == y[1] end
  if nd == 2 then return x[1] == y[1] and x[2] == y[2] end
  for d = 1, nd do if x[d] ~= y[d] then return false end end
  return true
end

local function contiguousStrides(sz)
  local st, z = {}, 1
  for d = #sz, 1, -1 do st[d] = z; z = z * sz[d] end
  return st
end

-- Calls fn(o1, ..., on) for every position of the dims other than `dim`, where ok is the
-- 0-based element offset (storage offset included) of that slice's first element in ts[k].
-- The operands must agree in every size but `dim`'s. fn then walks size(dim) elements with
-- stride ts[k]._str[dim].
function apply.slices(ts, dim, fn)
  local n = #ts
  local sz = {}
  local ref = ts[1]._sz
  for d = 1, #ref do sz[d] = (d == dim) and 1 or ref[d] end
  for d = 1, #ref do if sz[d] == 0 then return end end
  local offs, cnt = {}, {}
  for k = 1, n do offs[k] = ts[k]._off end
  local nd = #sz
  for d = 1, nd do cnt[d] = 0 end
  while true do
    if n == 1 then fn(offs[1]) elseif n == 2 then fn(offs[1], offs[2])
    elseif n == 3 then fn(offs[1], offs[2], offs[3]) else fn(unpack(offs, 1, n)) end
    local d = nd
    while d > 0 do
      local c = cnt[d] + 1
      if c < sz[d] then
        cnt[d] = c
        for k = 1, n do offs[k] = offs[k] + ts[k]._str[d] end
        break
      end
      cnt[d] = 0
      for k = 1, n do offs[k] = offs[k] - ts[k]._str[d] * (sz[d] - 1) end
      d = d - 1
    end
    if d == 0 then return end
  end
end

-- Calls fn(offset) with each element's 0-based storage offset, in row-major order.
function apply.each(t, fn)
  local nd = #t._sz
  if nd == 0 then return end
  apply.slices({ t }, nd, function(o)
    local s, m = t._str[nd], t._sz[nd]
    for i = 0, m - 1 do fn(o + i * s) end
  end)
end

apply.contiguousStrides = contiguousStrides
apply.sameSizes = sameSizes

-- t's own array of sizes (1-based; read it, never change it): for the per-call caches of code
-- outside the tensor library that compare an input's sizes with those it was made for, without
-- a copy (t:size() makes a LongStorage).
function apply.sizes(t) return t._sz end

return apply
