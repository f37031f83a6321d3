-- libhash: torch/hash (a Torch7 package) in Lua over LuaJIT's 64-bit FFI integers: XXH64 and
-- FNV64 (FNV-1a from the seed, as torch/hash's fnv.c starts hval at the seed) of Lua strings,
-- numbers (the 8 bytes of the double) and CPU tensors (their elements' bytes in order, whatever
-- the strides). hash.hash(stuff [, seed] [, mod]), hash.hash(stuff, 'XXH64'|'FNV64' [, seed]
-- [, mod]), hash.hash(stuff, state [, seed] [, mod]); states from hash.XXH64([seed]) and
-- hash.FNV64([seed]) with reset, update, digest, hash and clone. mod is 2^53 by default.
require 'torch'
local ffi = require 'ffi'
local bit = require 'bit'

local hash = {}
local U64 = ffi.typeof('uint64_t')
local P1, P2 = U64(11400714785074694791ULL), U64(14029467366897019727ULL)
local P3, P4, P5 = U64(1609587929392839161ULL), U64(9650029242287828579ULL), U64(2870177450012600261ULL)
local FNV_PRIME = U64(0x100000001b3ULL)
local MAX_MOD = 2 ^ 53
local rol, bxor, rshift = bit.rol, bit.bxor, bit.rshift

-- a Lua number as C's (unsigned long long)(long) cast of luaL_optlong
local function u64(n, what)
  if type(n) ~= 'number' then error(('hash: %s must be a number, got %s'):format(what, type(n)), 3) end
  return ffi.cast('uint64_t', ffi.cast('int64_t', n))
end

local function round(acc, input)
  acc = acc + input * P2
  return rol(acc, 31) * P1
end

local function merge(acc, v)
  acc = bxor(acc, round(U64(0), v))
  return acc * P1 + P4
end

local function xxh64(s, seed)
  local n = #s
  local p = ffi.cast('const uint8_t *', s)
  local i, h = 0, nil
  if n >= 32 then
    local v1, v2, v3, v4 = seed + P1 + P2, seed + P2, seed + 0, seed - P1
    while i + 32 <= n do
      local q = ffi.cast('const uint64_t *', p + i)
      v1, v2, v3, v4 = round(v1, q[0]), round(v2, q[1]), round(v3, q[2]), round(v4, q[3])
      i = i + 32
    end
    h = rol(v1, 1) + rol(v2, 7) + rol(v3, 12) + rol(v4, 18)
    h = merge(merge(merge(merge(h, v1), v2), v3), v4)
  else
    h = seed + P5
  end
  h = h + U64(n)
  while i + 8 <= n do
    h = bxor(h, round(U64(0), ffi.cast('const uint64_t *', p + i)[0]))
    h = rol(h, 27) * P1 + P4
    i = i + 8
  end
  if i + 4 <= n then
    h = bxor(h, U64(ffi.cast('const uint32_t *', p + i)[0]) * P1)
    h = rol(h, 23) * P2 + P3
    i = i + 4
  end
  while i < n do
    h = bxor(h, U64(p[i]) * P5)
    h = rol(h, 11) * P1
    i = i + 1
  end
  h = bxor(h, rshift(h, 33)) * P2
  h = bxor(h, rshift(h, 29)) * P3
  return bxor(h, rshift(h, 32))
end

local function fnv64(s, seed)
  local h = seed
  local p = ffi.cast('const uint8_t *', s)
  for i = 0, #s - 1 do
    h = bxor(h, U64(p[i])) * FNV_PRIME
  end
  return h
end

-- the bytes torch/hash feeds the hash for one value
local tensorTypes = { ['torch.ByteTensor'] = true, ['torch.CharTensor'] = true, ['torch.ShortTensor'] = true,
                      ['torch.IntTensor'] = true, ['torch.LongTensor'] = true, ['torch.FloatTensor'] = true,
                      ['torch.DoubleTensor'] = true }
local function bytes(stuff)
  local t = type(stuff)
  if t == 'string' then return stuff end
  if t == 'number' then return ffi.string(ffi.new('double[1]', stuff), 8) end
  if torch.isTensor(stuff) and tensorTypes[torch.type(stuff)] then
    if stuff:nElement() == 0 then return '' end
    local c = stuff:contiguous()
    return ffi.string(ffi.cast('const char *', c:data()), c:nElement() * c:elementSize())
  end
  error('string, number, or tensor [number] expected', 3)
end

local Hash = torch.class('torch.Hash')
local kinds = { XXH64 = xxh64, FNV64 = fnv64 }

function Hash:__init(kind, seed)
  rawset(self, '_kind', kind)
  self:reset(seed)
end

function Hash:reset(seed)
  rawset(self, '_seed', u64(seed or 0, 'seed'))
  rawset(self, '_parts', {})
  return self
end

function Hash:update(stuff)
  local parts = rawget(self, '_parts')
  parts[#parts + 1] = bytes(stuff)
  return self
end

local function digest(self)
  local parts = rawget(self, '_parts')
  local s = table.concat(parts)
  rawset(self, '_parts', { s })
  return kinds[rawget(self, '_kind')](s, rawget(self, '_seed'))
end

local function modulo(mod, argn)
  mod = mod or MAX_MOD
  if type(mod) ~= 'number' then error(('hash: argument #%d (mod) must be a number'):format(argn), 3) end
  local m = u64(mod, 'mod')
  if m == 0 then error(('bad argument #%d to \'hash\' (modulo should be positive)'):format(argn), 3) end
  return m
end

function Hash:digest(mod)
  return tonumber(digest(self) % modulo(mod, 2))
end

function Hash:hash(stuff, seed, mod)
  local m = modulo(mod, 4)
  self:reset(seed)
  self:update(stuff)
  return tonumber(digest(self) % m)
end

function Hash:clone()
  local c = torch.Hash(rawget(self, '_kind'))
  rawset(c, '_seed', rawget(self, '_seed'))
  rawset(c, '_parts', { table.concat(rawget(self, '_parts')) })
  return c
end

function hash.XXH64(seed) return torch.Hash('XXH64', seed) end
function hash.FNV64(seed) return torch.Hash('FNV64', seed) end

function hash.hash(stuff, a, b, c)
  local state, seed, mod
  if a == nil or type(a) == 'number' then
    state, seed, mod = torch.Hash('XXH64'), a, b
  elseif type(a) == 'string' then
    if not kinds[a] then error('invalid hash type (XXH64 || FNV64 expected)', 2) end
    state, seed, mod = torch.Hash(a), b, c
  elseif torch.type(a) == 'torch.Hash' then
    state, seed, mod = a, b, c
  else
    error('invalid arguments: stuff [seed] [mod] || stuff name [seed] [mod] || stuff hash [seed] [mod] expected', 2)
  end
  local m = u64(mod or MAX_MOD, 'mod')
  state:reset(seed)
  state:update(stuff)
  return tonumber(digest(state) % m)
end

return hash
