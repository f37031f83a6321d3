-- The CUDA backend: torch.CudaTensor (float, as in cutorch), torch.CudaDoubleTensor,
-- torch.CudaLongTensor, torch.CudaByteTensor, ... and their storages.
--
-- A CUDA storage holds `_id`, the id of a device array that Python keeps (luabridge/backend/cuda.py:
-- CuPy, or numpy standing in for it) and releases through the same handle as a CPU buffer; it
-- has no `_ptr`. CUDA tensors share the CPU structure methods (they only touch _st, _off, _sz,
-- _str) and answer `_device` with 'cuda'. Every math method checks its arguments here, with the
-- CPU messages, then calls one Python op by name; elements read one at a time go through a
-- host copy. Random numbers come from the array module's generator (torch.cudaManualSeed).
local torch = require 'torch.env'
local dtype = require 'torch.dtype'
local check = require 'torch.check'
local memory = require 'torch.memory'
local apply = require 'torch.backend.cpu.apply'
local object = require 'torch.object'

local py = memory.py
local Tensor = torch._TensorMethods
local make = torch._makeTensor
local isTensor, isStorage = torch.isTensor, torch.isStorage
local numel = apply.numel
local sizestr = check.sizestr

-- Calls the Python op with each tensor argument flattened into numbers (Python then reads no
-- Lua table): its kind, storage id (0: none), element offset, dtype name, dims, sizes, strides.
local DEVICE, HOST = '\0device', '\0host'
local function call(op, ...)
  local out, n = { op }, 1
  for i = 1, select('#', ...) do
    local x = select(i, ...)
    local mt = getmetatable(x)
    if type(mt) == 'table' and rawget(mt, '__tensor') then
      local st, sz, str = x._st, x._sz, x._str
      local nd = #sz
      out[n + 1] = rawget(mt, '_device') and DEVICE or HOST
      out[n + 2] = st and st._id or 0
      out[n + 3] = st and st._baseoff + x._off or 0
      out[n + 4] = rawget(mt, '_device') and x._dt.np or x._dt.name
      out[n + 5] = nd
      for d = 1, nd do out[n + 5 + d], out[n + 5 + nd + d] = sz[d], str[d] end
      n = n + 5 + 2 * nd
    else
      n = n + 1
      out[n] = x
    end
  end
  return py.cuda_op(unpack(out, 1, n))
end

local function copyArray(a) local r = {} for i = 1, #a do r[i] = a[i] end return r end

------------------------------------------------------------------------------------------------
-- element types: one CUDA type per CPU type, named as cutorch names them

local dtypes = {}          -- CPU type name ('Float') -> CUDA dtype ('Cuda')
local tensorMts, storageMts = {}, {}   -- CUDA type name -> metatable
for _, host in ipairs(dtype.list) do
  local name = host.name == 'Float' and 'Cuda' or 'Cuda' .. host.name
  local dt = {}
  for k, v in pairs(host) do dt[k] = v end
  dt.id, dt.name, dt.ptr, dt.host = host.id + 16, name, nil, host
  dt.tensor, dt.storage = 'torch.' .. name .. 'Tensor', 'torch.' .. name .. 'Storage'
  dtypes[host.name] = dt
end

local function isCuda(x)
  local mt = getmetatable(x)
  return type(mt) == 'table' and rawget(mt, '_device') ~= nil
end

-- A 1-element view of t at storage offset o.
local function at(t, o) return make(getmetatable(t), t._st, o, { 1 }, { 1 }) end

local function hostTensor(dt) return torch[dt.host.name .. 'Tensor']() end

------------------------------------------------------------------------------------------------
-- storages

local Storage = {}

local function newStorage(mt, n)
  memory.flush()
  local id, why = py.cuda_alloc(n, mt.__dtype.np)
  if not id then check.error(mt.__typename .. ': ' .. why) end
  return object.new(mt, { _n = n, _h = memory.handle(id), _id = id, _dt = mt.__dtype, _base = false, _baseoff = 0 })
end

-- A storage as a 1-D tensor of its type (CPU or CUDA).
local function asTensor(s) return make(torch.getmetatable(s._dt.tensor), s, 0, { s._n }, { 1 }) end

local function checkStorageIndex(s, i)
  if type(i) ~= 'number' or i ~= math.floor(i) then
    check.error('storage index must be an integer, got ' .. tostring(i))
  end
  if i < 1 or i > s._n then check.error(('index %d out of bounds for storage of size %d'):format(i, s._n)) end
end

function Storage.size(s) return s._n end
function Storage.elementSize(s) return s._dt.size end
function Storage.fill(s, v) asTensor(s):fill(v) return s end
function Storage.zero(s) asTensor(s):zero() return s end
function Storage.totable(s) return asTensor(s):totable() end
function Storage.data(s) check.error('data: a CUDA storage has no host pointer') end
Storage.pointer = Storage.data
function Storage.__tostring__(s) return torch._storageToString(s) end

function Storage.resize(s, n)
  if type(n) ~= 'number' or n < 0 or n ~= math.floor(n) then
    check.error('resize: storage size must be a non-negative integer, got ' .. tostring(n))
  end
  if n == s._n then return s end
  if s._base then check.error('resize: cannot resize a storage that views another storage') end
  local fresh = newStorage(getmetatable(s), n)
  local keep = math.min(n, s._n)
  if keep > 0 then asTensor(fresh):narrow(1, 1, keep):copy(asTensor(s):narrow(1, 1, keep)) end
  s._h, s._id, s._n = fresh._h, fresh._id, n
  return s
end

function Storage.copy(s, src)
  if type(src) == 'table' and not isStorage(src) then
    if #src ~= s._n then check.error(('copy: size mismatch, storage %d vs table %d'):format(s._n, #src)) end
    asTensor(s):copy(torch[s._dt.host.name .. 'Tensor'](src))
    return s
  end
  if not isStorage(src) then check.error('copy: expected a storage or a table') end
  if src._n ~= s._n then check.error(('copy: size mismatch, %d vs %d'):format(s._n, src._n)) end
  asTensor(s):copy(asTensor(src))
  return s
end

-- Storage.copy of a CPU storage from this one.
function Storage._copyTo(s, dst) asTensor(dst):copy(asTensor(s)) return dst end

-- Byte and Char storages to and from Lua strings, through the host.
function Storage.string(s, str)
  local h = torch[s._dt.host.name .. 'Storage']()
  if str == nil then return h:resize(s._n):copy(s):string() end
  h:string(str)
  return s:resize(h._n):copy(h)
end

for _, dt in pairs(dtypes) do
  local mt = object.metatable(Storage)
  mt.__typename, mt.__storage, mt.__dtype, mt._device, mt.__alloc = dt.storage, true, dt, 'cuda', newStorage
  mt.type = torch._storageMetatables[dt.host.storage].type   -- Storage.lua's, via __alloc
  mt.__index = object.indexer(mt, function(s, k)
    if type(k) == 'number' then
      checkStorageIndex(s, k)
      return asTensor(s)[k]
    end
  end)
  mt.__newindex = object.setter(function(s, k, v)
    checkStorageIndex(s, k)
    asTensor(s)[k] = v
  end)
  mt.__len = function(s) return s._n end
  mt.__tostring = function(s) return s:__tostring__() end
  mt.__factory = function() return newStorage(mt, 0) end
  mt.__constructor = setmetatable({}, {
    __index = mt, __newindex = mt,
    __call = function(_, ...) return torch._constructStorage(mt, ...) end,
  })
  storageMts[dt.name] = mt
  torch[dt.name .. 'Storage'] = mt.__constructor
  torch._registermetatable(dt.storage, mt)
end

-- A storage over a device array that Python registered (luabridge.cuda.from_device_array).
function torch._cudaStorageFromBuffer(typeName, id, n)
  local mt = storageMts[typeName]
  return object.new(mt, { _n = n, _h = memory.handle(id), _id = id, _dt = mt.__dtype, _base = false, _baseoff = 0 })
end

------------------------------------------------------------------------------------------------
-- tensors: the CPU structure methods, element access through the host

local Methods = {}
for _, name in ipairs {
  'dim', 'nDimension', 'size', 'stride', 'nElement', 'numel', 'storage', 'storageOffset',
  'isContiguous', 'elementSize', 'isSameSizeAs', 'isSize', 'isSetTo', 'set', 'resize', 'resizeAs',
  'narrow', 'select', 'sub', 'transpose', 't', 'permute', 'view', 'viewAs', 'expand', 'expandAs',
  'squeeze', 'unsqueeze', 'unfold', 'contiguous', 'clone', 'type', 'typeAs',
} do
  Methods[name] = assert(Tensor[name], name)
end
for _, dt in ipairs(dtype.list) do   -- float(), double(), ... back to the CPU
  local name = dt.name:lower()
  Methods[name] = Tensor[name]
end
-- CPU methods written with tensor methods only (math/join.lua, math/operators.lua) serve both;
-- torch.cat, torch.split, torch.chunk too. Absent ones stay absent.
for _, name in ipairs { 'cat', 'split', 'chunk', '__add', '__sub', '__mul', '__div', '__mod', '__unm' } do
  Methods[name] = torch._tensorMetatables.Float[name]
end

function Methods.data() check.error('data: a CUDA tensor has no host pointer') end
function Methods.getDevice() return 1 end
function Methods._readAt(t, o) return call('item', at(t, o)) end
function Methods._writeAt(t, o, v) at(t, o):fill(v) end

-- The values in a new CPU tensor of the matching host type.
function Methods._host(t)
  local h = hostTensor(t._dt)
  h:resize(copyArray(t._sz))
  return h:copy(t)
end

-- copy.lua's hook: a CPU tensor dst copies from this one.
function Methods._copyTo(t, dst)
  check.sameElements('copy', dst, t)
  call('download', dst, t)
  return dst
end

function Methods.totable(t) return t:_host():totable() end
function Methods.__tostring__(t) return torch._tensorToString(t) end

-- apply / map / map2 run on a host copy, written back.
for _, name in ipairs { 'apply', 'map', 'map2' } do
  Methods[name] = function(t, ...)
    local args = { ... }
    for i = 1, #args do if isCuda(args[i]) then args[i] = args[i]:_host() end end
    local h = t:_host()
    h[name](h, unpack(args, 1, select('#', ...)))
    return t:copy(h)
  end
end

------------------------------------------------------------------------------------------------
-- argument forms, as torch7's wrappers declare them; each letter is one argument:
--   R  result of the operand type: optional in torch.f (a new one), self in the method
--   S  source: required in torch.f; in the method of a form with R, optional (self when absent)
--   r  optional result (new when absent)     T  tensor    n  number    b  boolean
--   x=v  optional, default v (nil: none)     =v  the constant v

local accepts = {
  R = isTensor, S = isTensor, r = isTensor, T = isTensor,
  n = function(x) return type(x) == 'number' end,
  b = function(x) return type(x) == 'boolean' end,
}
local shown = { R = '[result]', S = 'tensor', r = '[result]', T = 'tensor', n = 'number', b = 'boolean' }

local function valueOf(s)
  if s == 'nil' then return nil end
  if s == 'true' or s == 'false' then return s == 'true' end
  return tonumber(s)
end

local function parseForm(form, isMethod)
  local specs = {}
  local sourceDefaults = isMethod and form:find('R') ~= nil   -- S defaults to self only beside an R
  for tok in form:gmatch('%S+') do
    local kind, eq, def = tok:match('^(%a?)(=?)(.*)$')
    local s = { kind = kind, default = valueOf(def) }
    if kind == '' then s.fixed = true
    elseif eq == '=' or kind == 'r' then s.optional = true
    elseif kind == 'R' then s.optional = not isMethod
    elseif kind == 'S' then s.optional, s.self = sourceDefaults, sourceDefaults end
    specs[#specs + 1] = s
  end
  return specs
end

-- Every way to call a form: each choice of present optional arguments, more of them first and
-- earlier ones before later ones (as torch7 tries them). A variant lists, per argument of the
-- body, the position of the caller's argument that fills it (or nil: the default).
local function variants(form, isMethod)
  local specs = parseForm(form, isMethod)
  local opt = {}
  for i, s in ipairs(specs) do if s.optional then opt[#opt + 1] = i end end
  local masks = {}
  for m = 0, 2 ^ #opt - 1 do masks[#masks + 1] = m end
  local function count(m) local c = 0 while m > 0 do c = c + m % 2; m = math.floor(m / 2) end return c end
  table.sort(masks, function(a, b)
    if count(a) ~= count(b) then return count(a) > count(b) end
    return a > b
  end)
  local out = {}
  for _, m in ipairs(masks) do
    local present = {}
    for k = 1, #opt do present[opt[k]] = math.floor(m / 2 ^ (#opt - k)) % 2 == 1 end
    local v, argc = { specs = specs, from = {} }, 0
    for i, s in ipairs(specs) do
      if not s.fixed and (not s.optional or present[i]) then
        argc = argc + 1
        v.from[i] = argc
      end
    end
    v.argc = argc
    out[#out + 1] = v
  end
  return out
end

local function describe(form)
  local words = {}
  for _, s in ipairs(parseForm(form, false)) do
    if not s.fixed then
      local w = shown[s.kind]
      if s.optional and s.kind ~= 'r' and s.kind ~= 'R' then w = '[' .. w .. ']' end
      words[#words + 1] = w
    end
  end
  return table.concat(words, ' ')
end

-- A function taking torch7's argument forms: forms is a list of { form, body }; the body gets
-- one value per letter of its form.
local function dispatcher(name, forms, isMethod)
  local byCount, usage = {}, {}
  for _, f in ipairs(forms) do
    for _, v in ipairs(variants(f[1], isMethod)) do
      v.body = f[2]
      byCount[v.argc] = byCount[v.argc] or {}
      table.insert(byCount[v.argc], v)
    end
    usage[#usage + 1] = describe(f[1])
  end
  usage = table.concat(usage, ' | ')
  return function(...)
    local args = { ... }
    local n = select('#', ...)
    for _, v in ipairs(byCount[n] or {}) do
      local fits = true
      for i, s in ipairs(v.specs) do
        local j = v.from[i]
        if j and not accepts[s.kind](args[j]) then fits = false; break end
      end
      if fits then
        local vals = {}
        for i, s in ipairs(v.specs) do
          local j = v.from[i]
          if j then vals[i] = args[j] elseif s.self then vals[i] = args[1] else vals[i] = s.default end
        end
        return v.body(unpack(vals, 1, #v.specs))
      end
    end
    local got = {}
    for i = 1, n do got[i] = torch.type(args[i]) end
    check.error(('%s: invalid arguments (%s); expected %s'):format(name, table.concat(got, ', '), usage))
  end
end

local functions = {}   -- torch.f forms for CUDA tensors
local function def(name, ...)
  local forms = { ... }
  Methods[name] = dispatcher(name, forms, true)
  functions[name] = dispatcher(name, forms, false)
end

------------------------------------------------------------------------------------------------
-- checks

-- The ops torch7 has for floating-point types only.
local function floatOnly(op, t)
  if t._dt.integer then
    check.error(('%s: expected a torch.CudaTensor, torch.CudaDoubleTensor or torch.CudaHalfTensor, got %s'):format(
      op, torch.typename(t)))
  end
end

-- Integer types have no division by zero (C traps): refused before anything is written.
local function divisor(op, t, v)
  if t._dt.integer and (v < 0 and math.ceil(v) or math.floor(v)) == 0 then
    check.error(('%s: integer division by zero (%s)'):format(op, torch.typename(t)))
  end
end

-- r (or a new tensor of src's type) resized as src, once src's partners are checked.
local function result(op, r, src, ...)
  r = r or src.new()
  check.sameType(op, src, r)
  for i = 1, select('#', ...) do
    local x = select(i, ...)
    check.sameType(op, src, x)
    check.sameElements(op, src, x)
  end
  return r:resizeAs(src)
end

-- r (or a new tensor of src's type) with sizes sz.
local function sized(op, r, src, sz)
  r = r or src.new()
  check.sameType(op, src, r)
  return r:resize(sz)
end

-- An index tensor: a LongTensor or CudaLongTensor (on the host or the device: both are read).
local function checkLong(op, idx)
  check.tensorOf(op, idx, 'the index')
  if idx._dt ~= dtype.Long and idx._dt ~= dtypes.Long then
    check.error(('%s: the index must be a torch.LongTensor or torch.CudaLongTensor, got %s'):format(
      op, torch.typename(idx)))
  end
end

-- Every index lies in [1, size of t's dimension d].
local function checkRange(op, idx, t, d)
  if numel(idx) == 0 then return end
  local lo, hi = call('minmax', idx)
  if lo < 1 or hi > t._sz[d] then
    check.error(('%s: index %d out of range for dimension %d of size %d'):format(op, lo < 1 and lo or hi, d, t._sz[d]))
  end
end

-- A 1-D index into dimension d of t.
local function checkIndexVector(op, idx, t, d)
  check.dim(op, t, d)
  checkLong(op, idx)
  if #idx._sz ~= 1 then check.error(('%s: the index must be a vector (1D), got %s'):format(op, sizestr(idx))) end
  checkRange(op, idx, t, d)
end

-- A mask (ByteTensor or CudaByteTensor of 0 and 1) with t's element count.
local function checkMask(op, mask, t)
  check.tensorOf(op, mask, 'mask')
  if mask._dt ~= dtype.Byte and mask._dt ~= dtypes.Byte then
    check.error(('%s: the mask must be a torch.ByteTensor or torch.CudaByteTensor, got %s'):format(
      op, torch.typename(mask)))
  end
  check.sameElements(op, t, mask)
  if numel(mask) > 0 and select(2, call('minmax', mask)) > 1 then check.error(op .. ': the mask can hold 0 and 1 only') end
end

-- t's sizes with dim d set to n.
local function withSize(t, d, n)
  local sz = copyArray(t._sz)
  sz[d] = n
  return sz
end

------------------------------------------------------------------------------------------------
-- fill, copy

def('fill', { 'T n', function(t, v) call('fill', t, v) return t end })
def('zero', { 'T', function(t) call('fill', t, 0) return t end })

def('copy', { 'T T', function(t, src)
  check.sameElements('copy', t, src)
  call(src._device and 'copy' or 'upload', t, src)
  return t
end })

------------------------------------------------------------------------------------------------
-- pointwise

local anyType = { abs = true, sign = true, neg = true }
for _, name in ipairs {
  'exp', 'log', 'log1p', 'sqrt', 'rsqrt', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh',
  'tanh', 'sigmoid', 'floor', 'ceil', 'round', 'trunc', 'frac', 'cinv', 'abs', 'sign', 'neg',
} do
  def(name, { 'R S', function(r, s)
    if not anyType[name] then floatOnly(name, s) end
    r = result(name, r, s)
    call('unary', name, r, s)
    return r
  end })
end

-- r = s (op) value and r = s (op) t (elementwise), for the Python binary ops
local divides = { div = true, fmod = true, remainder = true }
local function byValue(name, op)
  return { 'R S n', function(r, s, v)
    if divides[op] then divisor(name, s, v) end
    r = result(name, r, s)
    call('binary', op, r, s, v)
    return r
  end }
end
local function byTensor(name, op)
  return { 'R S T', function(r, s, t)
    if op == 'atan2' then floatOnly(name, s) end
    r = result(name, r, s, t)
    call('binary', op, r, s, t)
    return r
  end }
end
for name, op in pairs { mul = 'mul', div = 'div', fmod = 'fmod', mod = 'fmod', remainder = 'remainder' } do
  def(name, byValue(name, op))
end
for name, op in pairs { cmul = 'mul', cdiv = 'div', cpow = 'pow', cfmod = 'fmod', cmod = 'fmod',
                        cremainder = 'remainder', atan2 = 'atan2' } do
  def(name, byTensor(name, op))
end
def('cmax', byTensor('cmax', 'max'), byValue('cmax', 'max'))
def('cmin', byTensor('cmin', 'min'), byValue('cmin', 'min'))
def('pow', byValue('pow', 'pow'), { 'R n S', function(r, v, s)   -- value ^ s
  r = result('pow', r, s)
  call('binary', 'tpow', r, s, v)
  return r
end })

-- add: r = s + value, r = s + value * t; csub subtracts
for name, sign in pairs { add = 1, csub = -1 } do
  def(name,
    { 'R S n', function(r, s, v)
      r = result(name, r, s)
      call('add', r, s, sign * v, nil)
      return r
    end },
    { 'R S n=1 T', function(r, s, v, t)
      r = result(name, r, s, t)
      call('add', r, s, sign * v, t)
      return r
    end })
end

for _, name in ipairs { 'addcmul', 'addcdiv' } do
  def(name, { 'R S n=1 T T', function(r, s, v, t1, t2)
    check.sameType(name, t1, t2)
    check.sameElements(name, t1, t2)
    r = result(name, r, s, t1)
    call(name, r, s, v, t1, t2)
    return r
  end })
end

def('clamp', { 'R S n n', function(r, s, lo, hi)
  r = result('clamp', r, s)
  call('clamp', r, s, lo, hi)
  return r
end })

def('lerp', { 'R S T n', function(r, s, t, w)
  floatOnly('lerp', s)
  r = result('lerp', r, s, t)
  call('lerp', r, s, t, w)
  return r
end })

-- comparisons: a CudaByteTensor of 0/1 (or a result of the operand type)
for _, name in ipairs { 'lt', 'le', 'gt', 'ge', 'eq', 'ne' } do
  local function compare(r, s, y)
    if r ~= nil and r._dt ~= dtypes.Byte and r._dt ~= s._dt then
      check.error(('%s: the result must be a torch.CudaByteTensor or a %s, got %s'):format(
        name, torch.typename(s), torch.typename(r)))
    end
    if isTensor(y) then
      check.sameType(name, s, y)
      check.sameElements(name, s, y)
    end
    r = (r or torch.CudaByteTensor()):resizeAs(s)
    call('binary', name, r, s, y)
    return r
  end
  def(name, { 'r S n', compare }, { 'r S T', compare })
end

-- Values (r, or new) and CudaLongTensor indices (idx, or new) with sizes sz.
local function sortedOut(op, r, idx, s, sz)
  if idx ~= nil and idx._dt ~= dtypes.Long then check.error(op .. ': indices must be a torch.CudaLongTensor') end
  r = sized(op, r, s, sz)
  return r, (idx or torch.CudaLongTensor()):resize(sz)
end

------------------------------------------------------------------------------------------------
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

------------------------------------------------------------------------------------------------
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

------------------------------------------------------------------------------------------------
-- indexing

-- index(dim, idx): the slices idx along dim (a new tensor, or res:index(src, dim, idx))
def('index', { 'r S n T', function(r, s, d, idx)
  if #s._sz == 0 then check.error('index: the source tensor is empty') end
  checkIndexVector('index', idx, s, d)
  r = sized('index', r, s, withSize(s, d, idx._sz[1]))
  call('index_select', r, s, d - 1, idx)
  return r
end })

for name, op in pairs { indexCopy = 'index_copy', indexAdd = 'index_add' } do
  def(name, { 'T n T T', function(t, d, idx, src)
    checkIndexVector(name, idx, t, d)
    check.tensorOf(name, src, 'source')
    check.sameType(name, t, src)
    check.dim(name, src, d)
    if src._sz[d] ~= idx._sz[1] then
      check.error(('%s: %d indices but the source has size %d in dimension %d'):format(name, idx._sz[1], src._sz[d], d))
    end
    if numel(src) / math.max(src._sz[d], 1) ~= numel(t) / math.max(t._sz[d], 1) then
      check.error(('%s: slices of the destination (%s) and the source (%s) along dimension %d differ in size'):format(
        name, sizestr(t), sizestr(src), d))
    end
    call(op, t, d - 1, idx, src)
    return t
  end })
end

def('indexFill', { 'T n T n', function(t, d, idx, v)
  checkIndexVector('indexFill', idx, t, d)
  call('index_fill', t, d - 1, idx, v)
  return t
end })

-- gather / scatter: an index of the operand's dims picks positions along dim d.
-- a and b have the same dimension count and sizes except along d.
local function checkAligned(op, a, b, d, what)
  if #a._sz ~= #b._sz then check.error(('%s: %s must have %d dimensions, got %s'):format(op, what, #a._sz, sizestr(b))) end
  for k = 1, #a._sz do
    if k ~= d and a._sz[k] ~= b._sz[k] then
      check.error(('%s: %s (%s) must match %s in every dimension but %d'):format(op, what, sizestr(b), sizestr(a), d))
    end
  end
end

local function checkAlong(op, t, d, idx)
  check.dim(op, t, d)
  checkLong(op, idx)
  checkAligned(op, t, idx, d, 'the index')
  checkRange(op, idx, t, d)
end

def('gather', { 'r S n T', function(r, s, d, idx)
  checkAlong('gather', s, d, idx)
  r = sized('gather', r, s, copyArray(idx._sz))
  call('gather', r, s, d - 1, idx)
  return r
end })

def('scatter',
  { 'T n T T', function(t, d, idx, src)
    checkAlong('scatter', t, d, idx)
    check.sameType('scatter', t, src)
    checkAligned('scatter', idx, src, d, 'the source')
    if src._sz[d] < idx._sz[d] then
      check.error(('scatter: the source (%s) is smaller than the index (%s) in dimension %d'):format(
        sizestr(src), sizestr(idx), d))
    end
    call('scatter', t, d - 1, idx, src)
    return t
  end },
  { 'T n T n', function(t, d, idx, v)
    checkAlong('scatter', t, d, idx)
    call('scatter', t, d - 1, idx, v)
    return t
  end })

def('maskedFill', { 'T T n', function(t, mask, v)
  checkMask('maskedFill', mask, t)
  call('masked_fill', t, mask, v)
  return t
end })

def('maskedCopy', { 'T T T', function(t, mask, src)
  checkMask('maskedCopy', mask, t)
  check.sameType('maskedCopy', t, src)
  local n = call('count_nonzero', mask)
  if n > numel(src) then
    check.error(('maskedCopy: the mask has %d ones but the source only %d elements'):format(n, numel(src)))
  end
  call('masked_copy', t, mask, src)
  return t
end })

def('maskedSelect', { 'r S T', function(r, s, mask)
  checkMask('maskedSelect', mask, s)
  r = sized('maskedSelect', r, s, { call('count_nonzero', mask) })
  call('masked_select', r, s, mask)
  return r
end })

def('nonzero', { 'r S', function(r, s)
  r = r or torch.CudaLongTensor()
  if r._dt ~= dtypes.Long then check.error('nonzero: the result must be a torch.CudaLongTensor') end
  r:resize(call('count_nonzero', s), #s._sz)
  call('nonzero', r, s)
  return r
end })

------------------------------------------------------------------------------------------------
-- sorting: values and CudaLongTensor indices along a dim (the last one by default)

local function lastDim(op, s, d)
  if #s._sz == 0 then check.error(op .. ': the tensor is empty (no dimensions)') end
  d = d or #s._sz
  check.dim(op, s, d)
  return d
end

def('sort', { 'r r S n=nil b=false', function(r, idx, s, d, desc)
  d = lastDim('sort', s, d)
  r, idx = sortedOut('sort', r, idx, s, copyArray(s._sz))
  call('sort', r, idx, s, d - 1, desc)
  return r, idx
end })

def('topk', { 'r r S n=1 n=nil b=false b=false', function(r, idx, s, k, d, largest)
  d = lastDim('topk', s, d)
  if k < 1 or k > s._sz[d] or k ~= math.floor(k) then
    check.error(('topk: k = %s out of range for dimension %d of size %d'):format(tostring(k), d, s._sz[d]))
  end
  r, idx = sortedOut('topk', r, idx, s, withSize(s, d, k))
  call('topk', r, idx, s, k, d - 1, largest)
  return r, idx
end })

local function kth(op, r, idx, s, k, d)
  d = lastDim(op, s, d)
  k = k or math.floor((s._sz[d] + 1) / 2)   -- median: the lower middle
  if k < 1 or k > s._sz[d] or k ~= math.floor(k) then
    check.error(('%s: k = %s out of range for dimension %d of size %d'):format(op, tostring(k), d, s._sz[d]))
  end
  r, idx = sortedOut(op, r, idx, s, withSize(s, d, 1))
  call('kthvalue', r, idx, s, k, d - 1)
  return r, idx
end
def('kthvalue', { 'r r S n n=nil', function(r, idx, s, k, d) return kth('kthvalue', r, idx, s, k, d) end })
def('median', { 'r r S n=nil', function(r, idx, s, d) return kth('median', r, idx, s, nil, d) end })

------------------------------------------------------------------------------------------------
-- random numbers (the array module's generator; see luabridge/backend/cuda.py)

for name, defaults in pairs { uniform = { 0, 1 }, normal = { 0, 1 }, cauchy = { 0, 1 },
                              logNormal = { 1, 2 }, exponential = { 1 } } do
  local form = 'T n=' .. defaults[1] .. (defaults[2] and ' n=' .. defaults[2] or '')
  def(name, { form, function(t, a, b)
    floatOnly(name, t)
    if (name == 'normal' or name == 'logNormal') and b < 0 or name == 'logNormal' and a <= 0 then
      check.error(name .. ': the standard deviation must be non-negative (and the mean positive for logNormal)')
    end
    call('random', name, t, a, b)
    return t
  end })
end

local function probability(op, p)
  if p < 0 or p > 1 then check.error(('%s: probability %s not in [0, 1]'):format(op, tostring(p))) end
end

def('geometric', { 'T n', function(t, p)
  if p <= 0 or p > 1 then check.error(('geometric: probability %s not in (0, 1]'):format(tostring(p))) end
  call('random', 'geometric', t, p, nil)
  return t
end })

def('bernoulli',
  { 'T n=0.5', function(t, p)
    probability('bernoulli', p)
    call('random', 'bernoulli', t, p, nil)
    return t
  end },
  { 'T T', function(t, p)   -- one probability per element (a float tensor, CPU or CUDA)
    floatOnly('bernoulli', p)
    check.sameElements('bernoulli', t, p)
    call('random', 'bernoulli', t, p, nil)
    return t
  end })

-- random(): integers in [1, 2^32]; random(b): [1, b]; random(a, b): [a, b]
def('random', { 'T n=nil n=nil', function(t, a, b)
  if a == nil then a, b = 1, 2 ^ 32 elseif b == nil then a, b = 1, a end
  if b < a then check.error(('random: upper bound %s below lower bound %s'):format(tostring(b), tostring(a))) end
  call('random', 'random', t, a, b)
  return t
end })

function torch.cudaManualSeed(seed)
  check.number('cudaManualSeed', seed, 'seed')
  call('seed', seed)
end

------------------------------------------------------------------------------------------------
-- the tensor types

-- torch.CudaTensor({...}): the table's values through a CPU tensor of the host type.
local function fromTable(mt, tbl)
  local h = torch[mt.__dtype.host.name .. 'Tensor'](tbl)
  return make(mt):resize(copyArray(h._sz)):copy(h)
end

-- t[k] with a CUDA mask or index tensor; the rest as on the CPU.
local function index(t, k)
  if isCuda(k) then
    if k._dt == dtypes.Byte then return t:maskedSelect(k) end
    if k._dt == dtypes.Long then return t:index(1, k) end
    check.error('index: tensor indices must be a ByteTensor mask or a LongTensor')
  end
  if type(k) == 'string' and Tensor[k] ~= nil and k:sub(1, 1) ~= '_' then
    return function() check.error(('%s: not supported for CUDA tensors'):format(k)) end
  end
  return torch._tensorIndex(t, k)
end

local function newindex(t, k, v)
  if isCuda(k) then
    if k._dt == dtypes.Byte then
      if isTensor(v) then t:maskedCopy(k, v) else t:maskedFill(k, v) end
    elseif k._dt == dtypes.Long then
      if isTensor(v) then t:indexCopy(1, k, v) else t:indexFill(1, k, v) end
    else
      check.error('index: tensor indices must be a ByteTensor mask or a LongTensor')
    end
    return
  end
  torch._tensorNewIndex(t, k, v)
end

for _, dt in pairs(dtypes) do
  tensorMts[dt.name] = torch._newTensorClass(dt, Methods, index, newindex,
                                             { _device = 'cuda', __fromTable = fromTable })
end

------------------------------------------------------------------------------------------------
-- conversions: x:cuda() (float), x:cudaDouble(), x:cudaLong(), ... on every tensor type

local converters = {}
for host, dt in pairs(dtypes) do
  local name = host == 'Float' and 'cuda' or 'cuda' .. host
  converters[name] = function(t) return t:type(dt.tensor) end
end
for name, fn in pairs(converters) do
  torch._method(name, fn)
  for _, mt in pairs(tensorMts) do mt[name] = fn end
end

-- torch.f(...) routes to the CUDA forms when its tensor argument (first, second, or the first
-- of a table) is a CUDA tensor.
local function onDevice(a, b)
  return isCuda(a) or isCuda(b) or (type(a) == 'table' and not isTensor(a) and isCuda(a[1]))
end
local methodOnly = { copy = true, indexCopy = true, indexAdd = true, indexFill = true, scatter = true,
                     maskedFill = true, maskedCopy = true }
for name, fn in pairs(functions) do
  local cpu = rawget(torch, name)
  if cpu ~= nil or not methodOnly[name] then torch[name] = function(...)
    if onDevice(...) then return fn(...) end
    if cpu == nil then check.error(('torch.%s: no CPU implementation'):format(name)) end
    return cpu(...)
  end end
end

-- call: for the device passes of other libraries (nn; luabridge/backend/cuda_nn.py)
return { dtypes = dtypes, tensorMetatables = tensorMts, storageMetatables = storageMts, call = call }
