-- Tensor:cdata() and Storage:cdata(): FFI structs laid out as torch7's THTensor / THStorage, so
-- FFI code reading t:cdata().storage.data, .size[d] or .nDimension runs. Each object has one
-- struct for its lifetime (a stable address, held in its fields); every call refreshes it from
-- the object, since resize and set change what it describes. The structs are luabridge_TH...,
-- with torch7's names (THFloatTensor, ...) declared for them, as torch7's FFInterface does.
local ffi = require 'ffi'
local torch = require 'torch.env'
local dtype = require 'torch.core.dtype'
local escape = require('torch.core.versions').escape   -- the struct hands out the data pointer

local structs = {}   -- dtype name -> { storage = ctype, tensor = ctype }
for _, dt in ipairs(dtype.list) do
  local storage, tensor = 'luabridge_TH' .. dt.name .. 'Storage', 'luabridge_TH' .. dt.name .. 'Tensor'
  ffi.cdef(([[
  typedef struct { %s *data; ptrdiff_t size; int refcount; char flag; void *allocator; void *allocatorContext; } %s;
  typedef struct { long *size; long *stride; int nDimension; %s *storage; ptrdiff_t storageOffset; int refcount; char flag; } %s;
  ]]):format(dt.ctype, storage, storage, tensor))
  structs[dt.name] = { storage = ffi.typeof(storage), tensor = ffi.typeof(tensor) }
end

-- torch7's FFInterface.lua declares THAllocator and TH<Real>Storage / TH<Real>Tensor when torch
-- loads, and code declares functions on them without the structs (dp's and openface's
-- `void THFloatStorage_free(THFloatStorage *self);`): the same names, for the structs above.
ffi.cdef [[
typedef struct THAllocator {
  void* (*malloc)(void*, ptrdiff_t);
  void* (*realloc)(void*, void*, ptrdiff_t);
  void (*free)(void*, void*);
} THAllocator;
]]
for _, dt in ipairs(dtype.list) do
  ffi.cdef(('typedef luabridge_TH%sStorage TH%sStorage; typedef luabridge_TH%sTensor TH%sTensor;')
    :format(dt.name, dt.name, dt.name, dt.name))
end
local longs = ffi.typeof('long[?]')

local function storageCdata(s)
  local c = s._cdata
  if c == nil then
    c = structs[s._dt.name].storage()
    s._cdata = c
  end
  escape(s)
  c.data, c.size, c.refcount = s._ptr, s._n, 1
  return c
end

-- the sizes and strides arrays are reallocated only when the dimension count grows
local function tensorCdata(t)
  local c = t._cdata
  local nd = #t._sz
  if c == nil or t._cdataDims < nd then
    c = c or structs[t._dt.name].tensor()
    t._cdata, t._cdataDims = c, nd
    t._cdataSizes, t._cdataStrides = longs(math.max(nd, 1)), longs(math.max(nd, 1))
    c.size, c.stride = t._cdataSizes, t._cdataStrides
  end
  for d = 1, nd do c.size[d - 1], c.stride[d - 1] = t._sz[d], t._str[d] end
  c.nDimension, c.storageOffset, c.refcount = nd, t._off, 1
  c.storage = t._st and storageCdata(t._st) or nil
  return c
end

torch._method('cdata', tensorCdata)
for _, mt in pairs(torch._storageMetatables) do mt.cdata = storageCdata end
