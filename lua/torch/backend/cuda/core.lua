-- The CUDA backend's core: torch.CudaTensor (float, as in cutorch), torch.CudaDoubleTensor,
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
  local name = host.cuda
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


-- Values (r, or new) and CudaLongTensor indices (idx, or new) with sizes sz.
local function sortedOut(op, r, idx, s, sz)
  if idx ~= nil and idx._dt ~= dtypes.Long then check.error(op .. ': indices must be a torch.CudaLongTensor') end
  r = sized(op, r, s, sz)
  return r, (idx or torch.CudaLongTensor()):resize(sz)
end

-- What the family files (and init.lua) share while the CUDA types keep their own forms.
return {
  torch = torch, dtype = dtype, check = check, memory = memory, apply = apply, object = object,
  py = py, Tensor = Tensor, make = make, isTensor = isTensor, isStorage = isStorage, numel = numel,
  sizestr = sizestr, call = call, copyArray = copyArray, dtypes = dtypes, tensorMts = tensorMts,
  storageMts = storageMts, isCuda = isCuda, at = at, hostTensor = hostTensor, Methods = Methods,
  functions = functions, def = def, dispatcher = dispatcher, floatOnly = floatOnly, divisor = divisor, result = result,
  sized = sized, checkLong = checkLong, checkRange = checkRange,
  checkIndexVector = checkIndexVector, checkMask = checkMask, withSize = withSize, sortedOut = sortedOut,
}
