-- The CUDA backend's core: the types torch.CudaTensor (float, as in cutorch), torch.CudaDoubleTensor,
-- torch.CudaLongTensor, ... (one per row of elementtypes.lua), their storages, and `call`, the
-- marshaller of every CUDA op.
--
-- A CUDA storage holds `_id`, the id of a device array that Python keeps (luabridge/backend/cuda.py:
-- CuPy, or numpy standing in for it) and releases through the same handle as a CPU buffer; it
-- has no `_ptr`. CUDA tensors answer `_device` with 'cuda' and take the front-end methods of
-- math/ (one parser and one set of checks for every device), which reach the data through the
-- ops of backend.cuda: the family files register them as marshallers over `call`. The structure
-- methods are the CPU ones (they only touch _st, _off, _sz, _str); element access and host copies
-- go through the op table too. Random numbers come from the array module's generator.
local torch = require 'torch.env'
local dtype = require 'torch.core.dtype'
local check = require 'torch.core.check'
local memory = require 'torch.core.memory'
local object = require 'torch.core.object'
local backend = require 'torch.backend'

local py = memory.py
local Tensor = torch._TensorMethods
local make = torch._makeTensor
local isStorage = torch.isStorage

-- Calls the Python op with each tensor argument flattened into numbers (Python then reads no
-- Lua table): its kind, storage id (0: none), element offset, dtype name, dims, sizes, strides.
-- The flat list is one table reused (Python ops never call back into Lua).
local DEVICE, HOST = '\0device', '\0host'
local out = {}
local function call(op, ...)
  local n = 1
  out[1] = op
  for i = 1, select('#', ...) do
    local x = select(i, ...)
    local mt = getmetatable(x)
    if type(mt) == 'table' and rawget(mt, '__tensor') then
      local st, sz, str, onDevice = x._st, x._sz, x._str, rawget(mt, '_device')
      local nd = #sz
      out[n + 1] = onDevice and DEVICE or HOST
      out[n + 2] = st and st._id or 0
      out[n + 3] = st and st._baseoff + x._off or 0
      out[n + 4] = onDevice and x._dt.np or x._dt.name
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
-- tensors: the CPU structure methods; element access and host copies through the op table

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
-- CPU methods written with tensor methods only (math/join.lua, math/operators.lua, repeatTensor
-- and reshape in math/construct.lua) serve both;
-- torch.cat, torch.split, torch.chunk too. Absent ones stay absent.
for _, name in ipairs { 'cat', 'split', 'chunk', 'repeatTensor', 'reshape', '__add', '__sub', '__mul', '__div', '__mod', '__unm' } do
  Methods[name] = torch._tensorMetatables.Float[name]
end

function Methods.data() check.error('data: a CUDA tensor has no host pointer') end
function Methods.getDevice() return 1 end

-- Tensor.lua's element access (t[i], t[{i, j}] = v): one element through the op table.
backend.register('cuda', {
  item = function(a) return call('item', a) end,   -- the value of a one-element tensor
})
function Methods._readAt(t, o) return backend.cuda.item(at(t, o)) end
function Methods._writeAt(t, o, v) backend.cuda.fill(at(t, o), v) end

-- The values in a new CPU tensor of the matching host type.
function Methods._host(t)
  local h = hostTensor(t._dt):resize(copyArray(t._sz))
  backend.cuda.copy(h, t)
  return h
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

-- What the family files (and init.lua) share.
return {
  torch = torch, check = check, Tensor = Tensor, make = make, call = call, copyArray = copyArray,
  dtypes = dtypes, tensorMts = tensorMts, storageMts = storageMts, isCuda = isCuda, Methods = Methods,
}
