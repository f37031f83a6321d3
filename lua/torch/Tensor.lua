-- torch.<Type>Tensor: (storage, offset, sizes, strides) views with torch7's structure methods.
-- Fields: _st (storage or false), _off (0-based element offset), _sz, _str (Lua arrays), _dt.
local ffi = require 'ffi'
local torch = require 'torch.env'
local dtype = require 'torch.core.dtype'
local check = require 'torch.core.check'
local apply = require 'torch.core.apply'
local object = require 'torch.core.object'
local versions = require 'torch.core.versions'   -- write versions and escape marks of buffers

local Tensor = {}        -- methods shared by every CPU tensor type
local metatables = {}    -- dtype name -> metatable
torch._tensorMetatables = metatables
torch._TensorMethods = Tensor

local isContiguous, numel, contiguousStrides = apply.isContiguous, apply.numel, apply.contiguousStrides

local function isTensor(x)
  local mt = getmetatable(x)
  return type(mt) == 'table' and rawget(mt, '__tensor') == true
end
torch.isTensor = isTensor
Tensor.isTensor = isTensor   -- torch.Tensor.isTensor(x), as torch7

local function make(mt, st, off, sz, str)
  return object.new(mt, { _st = st or false, _off = off or 0, _sz = sz or {}, _str = str or {}, _dt = mt.__dtype })
end
torch._makeTensor = make

local function copyArray(a) local r = {} for i = 1, #a do r[i] = a[i] end return r end

-- torch.isStorage's test, local: constructors and indexing call it, and under Torch7 those are C
-- and reach no torch.* function (torch-autograd replaces every torch.* function while it traces
-- and rejects those it does not support, torch.isStorage among them)
local function isStorage(x)
  local mt = getmetatable(x)
  return type(mt) == 'table' and rawget(mt, '__storage') == true
end

local isInt = check.isInt

-- A size argument: numbers, a LongStorage, or a table of numbers.
local function sizesFrom(op, a, ...)
  local sz
  if isStorage(a) then sz = a:totable()
  elseif type(a) == 'table' and not isTensor(a) then sz = copyArray(a)
  else sz = { a, ... } end
  if #sz > check.MAXDIM then
    check.error(('%s: %d dimensions, at most %d are supported'):format(op, #sz, check.MAXDIM))
  end
  for d = 1, #sz do
    local s = check.truncate(sz[d])
    sz[d] = s
    if not isInt(s) or s < 0 then
      check.error(('%s: sizes must be non-negative integers below 2^53, got %s at dimension %d'):format(op, tostring(s), d))
    end
  end
  return sz
end
torch._sizesFrom = sizesFrom

-- Strides: integers of either sign, as many as there are sizes.
local function stridesFrom(op, a, nd)
  if not (isStorage(a) or (type(a) == 'table' and not isTensor(a))) then
    check.error(('%s: strides must be a LongStorage or a table, got %s'):format(op, torch.type(a)))
  end
  local str = isStorage(a) and a:totable() or copyArray(a)
  if #str ~= nd then check.error(('%s: %d sizes but %d strides'):format(op, nd, #str)) end
  for d = 1, nd do check.int(op, str[d], 'stride ' .. d) end
  return str
end

------------------------------------------------------------------------------------------------
-- structure queries

function Tensor.dim(t) return #t._sz end
Tensor.nDimension = Tensor.dim

function Tensor.size(t, d)
  if d ~= nil then
    check.dim('size', t, d)
    return t._sz[d]
  end
  return torch.LongStorage(t._sz)
end

function Tensor.stride(t, d)
  if d ~= nil then
    check.dim('stride', t, d)
    return t._str[d]
  end
  return torch.LongStorage(t._str)
end

function Tensor.nElement(t) return numel(t) end
Tensor.numel = Tensor.nElement
function Tensor.storage(t) return t._st or nil end
function Tensor.storageOffset(t) return t._off + 1 end
function Tensor.isContiguous(t) return isContiguous(t) end
function Tensor.elementSize(t) return t._dt.size end

-- The FFI pointer to the first element (nil for an empty tensor).
function Tensor.data(t)
  if not t._st then return nil end
  versions.escape(t._st)   -- the caller may write through it: plans cache nothing from this buffer
  return t._st._ptr + t._off
end

function Tensor.isSameSizeAs(t, other)
  return apply.sameSizes(t, other)
end

function Tensor.isSize(t, sizes)
  local sz = sizesFrom('isSize', sizes)
  return apply.sameSizes(t, { _sz = sz })
end

function Tensor.isSetTo(t, other)
  check.tensorOf('isSetTo', other)
  if not t._st or t._st ~= other._st or t._off ~= other._off then return false end
  if #t._sz ~= #other._sz or #t._sz == 0 then return false end
  for d = 1, #t._sz do
    if t._sz[d] ~= other._sz[d] or t._str[d] ~= other._str[d] then return false end
  end
  return true
end

------------------------------------------------------------------------------------------------
-- (re)shaping the view

-- A view's element count and the 0-based storage elements its first and last elements reach
-- (negative strides reach below the offset).
local function viewExtent(sz, str, off)
  local n, first, last = 1, off - 1, off - 1
  for d = 1, #sz do
    n = n * sz[d]
    if sz[d] > 0 then
      local reach = (sz[d] - 1) * str[d]
      if reach > 0 then last = last + reach else first = first + reach end
    end
  end
  return n, first, last
end
torch._viewExtent = viewExtent

-- Points t at storage st from offset (1-based) with sizes and strides; checks the extent.
local function setView(t, st, off, sz, str)
  check.int('set', off, 'storage offset', 1)
  local n, first, last = viewExtent(sz, str, off)
  if n >= check.MAXINT then check.error(('set: view of sizes %s has too many elements'):format(check.sizes(sz))) end
  if #sz > 0 and n > 0 then
    if not st then check.error('set: no storage to view') end
    if first < 0 or last >= st._n then
      check.error(('set: view of sizes %s, strides %s from offset %d needs %d elements but the storage has %d'):format(
        check.sizes(sz), table.concat(str, ','), off, last + 1, st._n))
    end
  end
  t._st, t._off, t._sz, t._str = st or false, off - 1, sz, str
  return t
end

-- set(), set(tensor), set(storage[, offset, sizes[, strides]]), set(storage, offset, sz1, st1, ...)
function Tensor.set(t, src, off, a, b, ...)
  if src == nil then
    t._st, t._off, t._sz, t._str = false, 0, {}, {}
    return t
  end
  if isTensor(src) then
    check.sameType('set', t, src)
    t._st, t._off, t._sz, t._str = src._st, src._off, copyArray(src._sz), copyArray(src._str)
    return t
  end
  if not isStorage(src) then check.error('set: expected a tensor or a storage, got ' .. torch.type(src)) end
  if src._dt ~= t._dt then check.error(('set: cannot view a %s from a %s'):format(torch.typename(src), torch.typename(t))) end
  off = off or 1
  local sz, str
  if a == nil then   -- the rest of the storage from off on
    check.int('set', off, 'storage offset', 1, src._n + 1)
    sz = { src._n - off + 1 }
    str = { 1 }
  elseif isStorage(a) or (type(a) == 'table') then
    sz = sizesFrom('set', a)
    str = b and stridesFrom('set', b, #sz) or contiguousStrides(sz)
  else
    local rest = { a, b, ... }
    local n = select('#', a, b, ...)
    while n > 0 and rest[n] == nil do n = n - 1 end
    local nsz = math.ceil(n / 2)
    sz, str = {}, {}
    for d = 1, nsz do sz[d] = rest[2 * d - 1] end
    sz = sizesFrom('set', sz)
    local z = 1
    for d = nsz, 1, -1 do
      str[d] = rest[2 * d] == nil and z or check.int('set', rest[2 * d], 'stride ' .. d)
      z = z * sz[d]
    end
  end
  return setView(t, src, off, sz, str)
end

-- resize(sizes...) / resize(LongStorage[, strides]): grows the storage only when it is too small.
function Tensor.resize(t, a, ...)
  local sz, str
  if isStorage(a) or (type(a) == 'table' and not isTensor(a)) then
    sz = sizesFrom('resize', a)
    local s2 = ...
    str = s2 and stridesFrom('resize', s2, #sz) or nil
  else
    sz = sizesFrom('resize', a, ...)
  end
  if not str and apply.sameSizes(t, { _sz = sz }) and (t._st or #sz == 0) then return t end
  str = str or contiguousStrides(sz)
  local need = 0
  if #sz > 0 then
    need = t._off + 1
    for d = 1, #sz do
      if sz[d] == 0 then need = 0; break end
      need = need + (sz[d] - 1) * str[d]
    end
  end
  if need >= check.MAXINT then
    check.error(('resize: sizes %s need %.0f elements, more than any storage can hold'):format(check.sizes(sz), need))
  end
  if need > 0 then
    if not t._st then
      t._st = torch[t._dt.name .. 'Storage'](need)
      t._off = 0
    elseif need > t._st._n then
      t._st:resize(need)
    end
  end
  t._sz, t._str = sz, str
  return t
end

function Tensor.resizeAs(t, other)
  check.tensorOf('resizeAs', other)
  if apply.sameSizes(t, other) then return t end
  return t:resize(copyArray(other._sz))
end

local function view(t) return make(getmetatable(t), t._st, t._off, copyArray(t._sz), copyArray(t._str)) end

function Tensor.narrow(t, d, index, size)
  check.dim('narrow', t, d)
  local n = t._sz[d]
  if not isInt(index) or not isInt(size) or index < 1 or size < 0 or index + size - 1 > n then
    check.error(('narrow: out of range: index %s, size %s for dimension %d of size %d'):format(
      tostring(index), tostring(size), d, n))
  end
  local r = view(t)
  r._off = t._off + (index - 1) * t._str[d]
  r._sz[d] = size
  return r
end

-- select(dim, index): one index along dim, dropping it (a number for a 1-dim tensor).
function Tensor.select(t, d, index)
  if #t._sz == 1 and type(d) == 'number' and d >= 1 and d == math.floor(d) then d = 1 end   -- torch7 ignores the dim of a 1D tensor
  check.dim('select', t, d)
  local n = t._sz[d]
  if type(index) ~= 'number' or index ~= math.floor(index) then
    check.error('select: index must be an integer, got ' .. tostring(index))
  end
  if index < 0 then index = n + index + 1 end
  if index < 1 or index > n then
    check.error(('select: index %d out of range for dimension %d of size %d'):format(index, d, n))
  end
  local off = t._off + (index - 1) * t._str[d]
  if #t._sz == 1 then
    if t._device then return t:_readAt(off) end
    local v = t._st._ptr[off]
    if t._dt.int64 then return tonumber(v) end
    if t._dt.half then return t:narrow(1, index, 1):float()._st._ptr[0] end
    return v
  end
  local r = view(t)
  r._off = off
  table.remove(r._sz, d)
  table.remove(r._str, d)
  return r
end

-- sub(d1s, d1e, d2s, d2e, ...): inclusive ranges, negative indices counting from the end.
function Tensor.sub(t, ...)
  local args = { ... }
  if #args % 2 ~= 0 or #args / 2 > #t._sz then
    check.error('sub: expected pairs of (first, last) indices, at most one per dimension')
  end
  local r = t
  for i = 1, #args, 2 do
    local d = (i + 1) / 2
    local n = t._sz[d]
    local a, b = args[i], args[i + 1]
    if not isInt(a) or not isInt(b) then
      check.error(('sub: indices must be integers, got %s and %s for dimension %d'):format(
        tostring(a), tostring(b), d))
    end
    if a < 0 then a = n + a + 1 end
    if b < 0 then b = n + b + 1 end
    if a < 1 or b > n or b < a - 1 then
      check.error(('sub: range [%d, %d] out of range for dimension %d of size %d'):format(args[i], args[i + 1], d, n))
    end
    r = r:narrow(d, a, b - a + 1)
  end
  if r == t then r = view(t) end
  return r
end

function Tensor.transpose(t, d1, d2)
  check.dim('transpose', t, d1)
  check.dim('transpose', t, d2)
  local r = view(t)
  r._sz[d1], r._sz[d2] = r._sz[d2], r._sz[d1]
  r._str[d1], r._str[d2] = r._str[d2], r._str[d1]
  return r
end

function Tensor.t(t)
  if #t._sz ~= 2 then check.error('t: expected a 2D tensor, got ' .. #t._sz .. 'D') end
  return t:transpose(1, 2)
end

function Tensor.permute(t, ...)
  local perm = { ... }
  if #perm == 1 and type(perm[1]) == 'table' then perm = perm[1] end
  local nd = #t._sz
  if #perm ~= nd then check.error(('permute: expected %d dimensions, got %d'):format(nd, #perm)) end
  local seen = {}
  for i = 1, nd do
    local p = perm[i]
    if not isInt(p) or p < 1 or p > nd or seen[p] then
      check.error('permute: not a permutation of the dimensions')
    end
    seen[p] = true
  end
  local r = view(t)
  for i = 1, nd do r._sz[i], r._str[i] = t._sz[perm[i]], t._str[perm[i]] end
  return r
end

-- A view (no copy) with new sizes; -1 stands for the size that keeps the element count.
local function viewSizes(op, t, sz)
  local n, infer = 1, nil
  for d = 1, #sz do
    if sz[d] == -1 then
      if infer then check.error(op .. ': only one dimension can be -1') end
      infer = d
    else
      n = n * sz[d]
    end
  end
  local total = numel(t)
  if infer then
    if n == 0 or total % n ~= 0 then
      check.error(('%s: cannot infer size -1 for %d elements'):format(op, total))
    end
    sz[infer] = total / n
    n = total
  end
  if n ~= total then
    check.error(('%s: size %s has %d elements but the tensor (%s) has %d'):format(
      op, check.sizes(sz), n, check.sizestr(t), total))
  end
  return sz
end

function Tensor.view(t, a, ...)
  if isTensor(a) and select('#', ...) > 0 then   -- view(src, sizes): result is t
    return t:set(a:view(...))
  end
  local sz
  if isStorage(a) or (type(a) == 'table' and not isTensor(a)) then sz = copyArray(isStorage(a) and a:totable() or a)
  else sz = { a, ... } end
  for d = 1, #sz do
    if not isInt(sz[d]) or sz[d] < -1 then
      check.error(('view: sizes must be non-negative integers (or -1), got %s at dimension %d'):format(
        tostring(sz[d]), d))
    end
  end
  sz = viewSizes('view', t, sz)
  if not isContiguous(t) then check.error('view: input is not contiguous (call :contiguous() first)') end
  return make(getmetatable(t), t._st, t._off, sz, contiguousStrides(sz))
end

-- viewAs(template), or result:viewAs(src, template)
function Tensor.viewAs(t, a, template)
  if template ~= nil then return t:view(a, copyArray(check.tensorOf('viewAs', template)._sz)) end
  return t:view(copyArray(check.tensorOf('viewAs', a)._sz))
end

-- Size-1 dims become stride-0 dims of the wanted size.
function Tensor.expand(t, a, ...)
  local sz
  if isTensor(a) and select('#', ...) > 0 then   -- result:expand(src, sizes): checked before set
    check.sameType('expand', t, a)
    return t:set(a:expand(...))
  end
  if isStorage(a) or (type(a) == 'table' and not isTensor(a)) then sz = sizesFrom('expand', a)
  else sz = sizesFrom('expand', a, ...) end
  if #sz ~= #t._sz then
    check.error(('expand: the number of sizes (%d) must equal the tensor dimension (%d)'):format(#sz, #t._sz))
  end
  local r = view(t)
  for d = 1, #sz do
    if t._sz[d] ~= sz[d] then
      if t._sz[d] ~= 1 then
        check.error(('expand: cannot expand dimension %d of size %d to %d (only size-1 dims expand)'):format(d, t._sz[d], sz[d]))
      end
      r._sz[d], r._str[d] = sz[d], 0
    end
  end
  return r
end

-- expandAs(template), or result:expandAs(src, template)
function Tensor.expandAs(t, a, template)
  if template ~= nil then return t:expand(a, copyArray(check.tensorOf('expandAs', template)._sz)) end
  return t:expand(copyArray(check.tensorOf('expandAs', a)._sz))
end

-- As torch7, a result that is a single element in one dim is returned as a number (for
-- squeeze(dim), only when the tensor had one dim to begin with).
function Tensor.squeeze(t, d)
  local r = view(t)
  if d ~= nil then
    check.dim('squeeze', t, d)
    if t._sz[d] == 1 and #t._sz > 1 then
      table.remove(r._sz, d); table.remove(r._str, d)
    elseif #t._sz == 1 and t._sz[1] == 1 then
      return r[1]
    end
    return r
  end
  local sz, str = {}, {}
  for i = 1, #t._sz do
    if t._sz[i] ~= 1 then sz[#sz + 1] = t._sz[i]; str[#str + 1] = t._str[i] end
  end
  if #sz == 0 and #t._sz > 0 then
    r._sz, r._str = { 1 }, { 1 }
    return r[1]
  end
  r._sz, r._str = sz, str
  return r
end

function Tensor.unsqueeze(t, d)
  check.dim('unsqueeze', t, d, 1)
  -- a tensor with no dimension has no element: a size-1 dimension would claim one it lacks
  if #t._sz == 0 then check.error('unsqueeze: the tensor has no dimension (it is empty)') end
  local r = view(t)
  local st = (d <= #t._sz) and t._sz[d] * t._str[d] or 1
  table.insert(r._sz, d, 1)
  table.insert(r._str, d, st)
  return r
end

-- unfold(dim, size, step): all slices of length size along dim, as a new last dimension.
function Tensor.unfold(t, d, size, step)
  check.dim('unfold', t, d)
  local n = t._sz[d]
  if not isInt(size) or size < 0 or size > n then
    check.error(('unfold: size %s out of range for dimension %d of size %d'):format(tostring(size), d, n))
  end
  if not isInt(step) or step < 1 then check.error('unfold: step must be a positive integer') end
  local r = view(t)
  r._sz[d] = math.floor((n - size) / step) + 1
  r._str[d] = step * t._str[d]
  r._sz[#r._sz + 1] = size
  r._str[#r._str + 1] = t._str[d]
  return r
end


function Tensor.contiguous(t)
  if isContiguous(t) then return t end
  return t:clone()
end

function Tensor.clone(t)
  local r = make(getmetatable(t))
  r:resize(copyArray(t._sz))
  return r:copy(t)
end

------------------------------------------------------------------------------------------------
-- element type conversion

function Tensor.type(t, name)
  if name == nil then return torch.typename(t) end
  if type(name) ~= 'string' then
    check.error(('type: expected a type name such as \'torch.FloatTensor\', got %s'):format(torch.type(name)))
  end
  if name == torch.typename(t) then return t end
  local mt = torch.getmetatable(name)
  if not mt or not rawget(mt, '__tensor') then check.error('type: unknown tensor type ' .. tostring(name)) end
  local r = mt.__constructor()
  r:resize(copyArray(t._sz))
  return r:copy(t)
end

function Tensor.typeAs(t, other) return t:type(torch.typename(other)) end
for _, dt in ipairs(dtype.list) do
  Tensor[dt.name:lower()] = function(t) return t:type(dt.tensor) end
end
function Tensor.real(t) return t:type(torch.getdefaulttensortype()) end

------------------------------------------------------------------------------------------------
-- elements from Lua

-- Offset of the element at 1-based indices idx (checked).
local function elementOffset(t, idx)
  local nd = #t._sz
  if #idx ~= nd then check.error(('index: expected %d indices, got %d'):format(nd, #idx)) end
  local o = t._off
  for d = 1, nd do
    local i = idx[d]
    local n = t._sz[d]
    if i < 0 then i = n + i + 1 end
    if i < 1 or i > n or i ~= math.floor(i) then
      check.error(('index %s out of range for dimension %d of size %d'):format(tostring(idx[d]), d, n))
    end
    o = o + (i - 1) * t._str[d]
  end
  return o
end

local function readAt(t, o)
  if t._device then return t:_readAt(o) end   -- a device tensor reads through a host copy
  if t._dt.half then
    local f = torch.FloatTensor(1)
    f:copy(make(getmetatable(t), t._st, o, { 1 }, { 1 }))
    return f._st._ptr[0]
  end
  local v = t._st._ptr[o]
  if t._dt.int64 then return tonumber(v) end
  return v
end

local function writeAt(t, o, v)
  if type(v) ~= 'number' then v = check.element('element assignment', v, 'value') end
  if t._device then return t:_writeAt(o, v) end
  if t._dt.half then
    make(getmetatable(t), t._st, o, { 1 }, { 1 }):copy(torch.FloatTensor({ v }))
    return
  end
  versions.bump(t._st)
  t._st._ptr[o] = v
end

-- An index number as torch7's C read it inside an index table: `long z = lua_tonumber(L, -1) - 1`,
-- a cast that truncates toward zero, so {2.7} is {2} (rlenvs' Catch indexes by a ball's real x).
local function cIndex(x)
  if type(x) ~= 'number' or x ~= x or x == math.floor(x) or x >= 2^53 or x <= -2^53 then return x end
  local z = x - 1
  z = z >= 0 and math.floor(z) or math.ceil(z)
  return z + 1
end

-- The view t[{...}] selects by numbers, narrows by {first, last} / {first} ranges, keeps {}.
local function indexTable(t, idx)
  local allNumbers = #idx == #t._sz
  for i = 1, #idx do if type(idx[i]) ~= 'number' then allNumbers = false end end
  if allNumbers and #idx > 0 then
    local ints = {}
    for i = 1, #idx do ints[i] = cIndex(idx[i]) end
    return nil, elementOffset(t, ints)
  end
  if #idx > #t._sz then check.error(('index: %d indices for a %dD tensor'):format(#idx, #t._sz)) end
  local r, d = t, 1
  for i = 1, #idx do
    local k = idx[i]
    local n = r._sz[d]
    if type(k) == 'number' then
      k = cIndex(k)
      if k < 0 then k = n + k + 1 end
      if k < 1 or k > n then check.error(('index %d out of range for dimension %d of size %d'):format(idx[i], i, n)) end
      if #r._sz == 1 then r = r:narrow(d, k, 1) ; d = d + 1
      else r = r:select(d, k) end
    elseif type(k) == 'table' then
      local a, b = cIndex(k[1] or 1), cIndex(k[2] or k[1] or n)
      if not isInt(a) or not isInt(b) then
        check.error(('index range {%s, %s}: expected integers'):format(tostring(k[1]), tostring(k[2])))
      end
      if a < 0 then a = n + a + 1 end
      if b < 0 then b = n + b + 1 end
      if a < 1 or b > n or b < a - 1 then
        check.error(('index range {%s, %s} out of range for dimension %d of size %d'):format(
          tostring(k[1]), tostring(k[2]), i, n))
      end
      r = r:narrow(d, a, b - a + 1)
      d = d + 1
    else
      check.error('index: expected numbers or tables in the index table, got ' .. torch.type(k))
    end
  end
  return r
end

-- t[LongStorage]: the element at those coordinates (t[#t] is the last one), as torch7.
local function storageKeyOffset(t, k)
  if k._dt.name ~= 'Long' then
    check.error('index: a storage key must be a LongStorage, got ' .. torch.typename(k))
  end
  if #t._sz == 0 then check.error('index: cannot index an empty tensor') end
  if k._n ~= #t._sz then
    check.error(('index: a LongStorage key of %d coordinates for a %dD tensor'):format(k._n, #t._sz))
  end
  return elementOffset(t, k:totable())
end

-- Writes v (a number, or a tensor of one element) at offset o.
local function assignAt(t, o, v)
  if isTensor(v) then
    make(getmetatable(t), t._st, o, { 1 }, { 1 }):copy(v)
  else
    writeAt(t, o, v)
  end
end

local function index(t, k)
  if type(k) == 'number' then
    if #t._sz == 0 then check.error('index: cannot index an empty tensor') end
    if #t._sz == 1 then return readAt(t, elementOffset(t, { k })) end
    return t:select(1, k)
  elseif isStorage(k) then
    return readAt(t, storageKeyOffset(t, k))
  elseif isTensor(k) then
    local kind = (k._dt.host or k._dt).name   -- a CUDA index holds its host type's elements
    if kind == 'Byte' then return t:maskedSelect(k) end
    if kind == 'Long' then return t:index(1, k) end
    check.error('index: tensor indices must be a ByteTensor mask or a LongTensor')
  elseif type(k) == 'table' then
    local r, o = indexTable(t, k)
    if r then return r end
    return readAt(t, o)
  end
  return nil
end

local function newindex(t, k, v)
  if type(k) == 'number' or (type(k) == 'table' and not isTensor(k)) then
    local r, o
    if type(k) == 'number' then
      if #t._sz == 0 then check.error('index: cannot index an empty tensor') end
      if #t._sz == 1 then o = elementOffset(t, { k }) else r = t:select(1, k) end
    else
      r, o = indexTable(t, k)
    end
    if o then return assignAt(t, o, v) end
    if isTensor(v) then r:copy(v) else r:fill(v) end
  elseif isStorage(k) then
    assignAt(t, storageKeyOffset(t, k), v)
  elseif isTensor(k) then
    local kind = (k._dt.host or k._dt).name
    if kind == 'Byte' then
      if isTensor(v) then t:maskedCopy(k, v) else t:maskedFill(k, v) end
    elseif kind == 'Long' then
      if isTensor(v) then t:indexCopy(1, k, v) else t:indexFill(1, k, v) end
    else
      check.error('index: tensor indices must be a ByteTensor mask or a LongTensor')
    end
  else
    check.error('index: cannot assign with a key of type ' .. type(k))
  end
end

-- Device tensor types (backend/cuda/init.lua) index through the same functions.
torch._tensorIndex, torch._tensorNewIndex = index, newindex

-- Calls fn(value) on every element in row-major order; a returned number replaces it.
function Tensor.apply(t, fn)
  if type(fn) ~= 'function' then check.error('apply: expected a function, got ' .. torch.type(fn)) end
  apply.each(t, function(o)
    local r = fn(readAt(t, o))
    if r ~= nil then writeAt(t, o, r) end
  end)
  return t
end

-- Offsets of every element, row-major (for the Lua-callback methods).
local function offsets(t)
  local r = {}
  apply.each(t, function(o) r[#r + 1] = o end)
  return r
end

function Tensor.map(t, other, fn)
  check.sameElements('map', t, other)
  local a, b = offsets(t), offsets(other)
  for i = 1, #a do
    local r = fn(readAt(t, a[i]), readAt(other, b[i]))
    if r ~= nil then writeAt(t, a[i], r) end
  end
  return t
end

function Tensor.map2(t, x, y, fn)
  check.sameElements('map2', t, x)
  check.sameElements('map2', t, y)
  local a, b, c = offsets(t), offsets(x), offsets(y)
  for i = 1, #a do
    local r = fn(readAt(t, a[i]), readAt(x, b[i]), readAt(y, c[i]))
    if r ~= nil then writeAt(t, a[i], r) end
  end
  return t
end

function Tensor.totable(t)
  local nd = #t._sz
  if nd == 0 then return {} end
  local function build(d, o)
    local r = {}
    local n, s = t._sz[d], t._str[d]
    for i = 1, n do
      if d == nd then r[i] = readAt(t, o) else r[i] = build(d + 1, o) end
      o = o + s
    end
    return r
  end
  return build(1, t._off)
end

-- torch.squeeze([res,] x [,dim]) and torch.permute(x, ...), the function forms torch7 had beside
-- the methods (TensorMath's squeeze wrap; Tensor.lua's `torch.permute = Tensor.permute`). With
-- res, res becomes the squeezed view; a single element comes back as a number, as the method.
function torch.squeeze(a, b, c)
  if torch.isTensor(b) then
    local res = check.tensorOf('squeeze', a)
    local v = b:squeeze(c)
    if type(v) == 'number' then
      res:set(b:storage(), b:storageOffset(), torch.LongStorage({ 1 }))
    else
      res:set(v)
    end
    return type(v) == 'number' and v or res
  end
  return check.tensorOf('squeeze', a):squeeze(b)
end

-- torch.zero(x), torch.fill(x, v) and torch.numel(x): TensorMath's wraps give them torch.*
-- forms beside the methods (torch-autograd's models call torch.zero)
function torch.zero(x) return check.tensorOf('zero', x):zero() end
function torch.fill(x, v) return check.tensorOf('fill', x):fill(v) end
function torch.numel(x) return check.tensorOf('numel', x):numel() end

function torch.permute(x, ...)
  return check.tensorOf('permute', x):permute(...)
end

function torch.totable(x)
  if not (torch.isTensor(x) or isStorage(x)) then check.error('torch.totable: expected a tensor or a storage, got ' .. torch.type(x)) end
  return x:totable()
end

------------------------------------------------------------------------------------------------
-- constructors

-- Sizes and contents of a nested table of numbers. Lengths are raw (rawlen), as torch7's C read
-- them (lua_objlen): under LUA52COMPAT `#` would call a torch object's __len.
local function fromTable(mt, tbl)
  local sz = {}
  local level = tbl
  while type(level) == 'table' do
    sz[#sz + 1] = rawlen(level)
    level = level[1]
  end
  local t = make(mt)
  if #sz == 1 and sz[1] == 0 then return t end
  t:resize(sz)
  local p = t._st and t._st._ptr   -- none for {{}}: no element to write, only the shape to check
  local flat = t._dt.half and {} or nil
  local pos = 0
  local function walk(x, d)
    if type(x) ~= 'table' or rawlen(x) ~= sz[d] then
      check.error(('%s: the table is not a regular array (dimension %d)'):format(mt.__typename, d))
    end
    for i = 1, sz[d] do
      local v = x[i]
      if d == #sz then
        if type(v) ~= 'number' then v = check.element(mt.__typename, v, 'table element') end
        if flat then flat[pos + 1] = v else p[pos] = v end
        pos = pos + 1
      else
        walk(v, d + 1)
      end
    end
  end
  walk(tbl, 1)
  if flat then t:copy(torch.FloatTensor(flat)) end
  return t
end

-- torch.<Type>Tensor(...); another backend's types give mt.__fromTable for the table form.
local construct = check.numericArgs(function(mt, a, ...)
  if a == nil then return make(mt) end
  if type(a) == 'number' then return make(mt):resize(a, ...) end
  if isTensor(a) then
    if a._dt ~= mt.__dtype then check.error(('%s: cannot share the storage of a %s'):format(mt.__typename, torch.typename(a))) end
    return make(mt):set(a)
  end
  if isStorage(a) then
    if a._dt == mt.__dtype then return make(mt):set(a, ...) end   -- a view of the storage
    if a._dt.name == 'Long' then return make(mt):resize(a, ...) end  -- LongStorage sizes[, strides]
    check.error(('%s: cannot view a %s'):format(mt.__typename, torch.typename(a)))
  end
  if type(a) == 'table' then return (rawget(mt, '__fromTable') or fromTable)(mt, a) end
  check.error(mt.__typename .. ': expected sizes, a LongStorage, a storage, a tensor or a table, got ' .. torch.type(a))
end)
torch._constructTensor = construct

-- Makes the tensor class of element type dt (torch.<Name>Tensor) with the given methods,
-- element reads index(t, key) and writes newindex(t, key, value), plus the entries of extra.
function torch._newTensorClass(dt, methods, indexFn, newindexFn, extra)
  local mt = object.metatable(methods)
  mt.__typename, mt.__tensor, mt.__dtype = dt.tensor, true, dt
  for k, v in pairs(extra or {}) do mt[k] = v end
  mt.__index = object.indexer(mt, indexFn)
  mt.__newindex = object.setter(newindexFn)
  mt.__len = function(t) return t:size() end
  mt.__tostring = function(t) return t:__tostring__() end
  mt.__factory = function() return make(mt) end
  -- new is the constructor, as in torch7: x.new() is an empty tensor of x's type, while
  -- x.new() passes x and so makes a tensor sharing x's storage
  mt.new = function(...) return construct(mt, ...) end
  mt.__constructor = setmetatable({}, {
    __index = mt,
    __newindex = function(_, k, v) mt[k] = v end,
    __call = function(_, ...) return construct(mt, ...) end,
  })
  torch[dt.tensor:match('^torch%.(.*)$')] = mt.__constructor
  torch._registermetatable(dt.tensor, mt)
  return mt
end

for _, dt in ipairs(dtype.list) do
  metatables[dt.name] = torch._newTensorClass(dt, Tensor, index, newindex)
end

-- Installs a method on every CPU tensor type (later files add math this way).
function torch._method(name, fn)
  Tensor[name] = fn
  for _, mt in pairs(metatables) do mt[name] = fn end
end

-- Function forms of the view methods, as torch7's: torch.view([res,] src, sizes), ...
for _, name in ipairs { 'view', 'viewAs', 'expand', 'expandAs' } do torch[name] = Tensor[name] end

-- torch.data(tensor or storage[, asnumber]): the FFI pointer to the first element, or its address
-- as a number, as torch7's.
function torch.data(x, asnumber)
  if not (torch.isTensor(x) or isStorage(x)) then
    check.error('torch.data: expected a tensor or a storage, got ' .. torch.type(x))
  end
  local p = x:data()
  if asnumber and p ~= nil then return tonumber(ffi.cast('intptr_t', p)) end
  return p
end

return Tensor
