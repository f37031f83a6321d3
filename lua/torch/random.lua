-- Random numbers: torch.Generator, seeding and saved states, and the random tensor fills: the
-- one front end for every device (arguments and parameters checked here), then the op
-- random(name, r, p1, p2, gen) of the tensor's backend: backend/cpu/random.lua (torch7's
-- MT19937 streams bit for bit, so a seed gives torch7's numbers) or backend/cuda/random.lua
-- (the array module's generator, seeded by torch.cudaManualSeed).
--
-- torch.getRNGState returns a ByteTensor holding torch7's THGenerator struct (64-bit Linux
-- layout, 5048 bytes); torch.setRNGState takes such a tensor (ours or one saved by torch7).
local ffi = require 'ffi'
local torch = require 'torch.env'
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local apply = require 'torch.core.apply'
local bumpVersion = require('torch.core.versions').bump
local mt = backend.host.mt19937   -- the CPU generator's streams (backend/cpu/random.lua)

local floor = math.floor
local isTensor, isContiguous, numel = torch.isTensor, apply.isContiguous, apply.numel
local N, TWO32, stateType, seedState, random32, uniform01 = mt.N, mt.TWO32, mt.stateType, mt.seed, mt.random32,
  mt.uniform01
local draws = mt.draws

ffi.cdef [[
typedef struct {
  uint64_t the_initial_seed;
  int32_t left, seeded;
  uint64_t next;
  uint64_t state[624];
  double normal_x, normal_y, normal_rho;
  int32_t normal_is_valid;
} luabridge_THGenerator;
]]
local savedPtr = ffi.typeof('luabridge_THGenerator *')
local SAVED_SIZE = ffi.sizeof('luabridge_THGenerator')

------------------------------------------------------------------------------------------------
-- torch.Generator

local Generator = torch.class('torch.Generator')

local function isGenerator(x) return getmetatable(x) == Generator end

-- 48 bits from /dev/urandom (the time where there is none).
local function entropy()
  local f = io.open('/dev/urandom', 'rb')
  local bytes = f and f:read(6)
  if f then f:close() end
  if not bytes or #bytes < 6 then return (os.time() * 1000003 + floor(os.clock() * 1e6)) % 2 ^ 48 end
  local v = 0
  for i = 1, 6 do v = v * 256 + bytes:byte(i) end
  return v
end

function Generator:__init()
  self._g = stateType()
  seedState(self._g, entropy())
end

local default = torch.Generator()
torch._gen = default

-- (state, ...) of the generator given as first argument, or of the default one.
local function withGen(a, ...)
  if isGenerator(a) then return a._g, ... end
  return default._g, a, ...
end

local function seedArg(op, seed)
  check.number(op, seed, 'seed')
  if seed ~= seed or math.abs(seed) >= 2 ^ 63 then check.error(op .. ': seed out of range: ' .. tostring(seed)) end
  return seed >= 0 and floor(seed) or -floor(-seed)   -- truncated, as C's cast to long
end

function torch.manualSeed(a, b)
  local g, seed = withGen(a, b)
  seedState(g, seedArg('manualSeed', seed))
end

function torch.seed(a)
  local g = withGen(a)
  local s = entropy()
  seedState(g, s)
  return s
end

function torch.initialSeed(a)
  local g = withGen(a)
  return tonumber(g.seed)
end

-- Copies the state into torch7's THGenerator layout at p (zeroed first: the bytes are
-- deterministic, so equal states give equal tensors).
local function saveState(g, p)
  ffi.fill(p, SAVED_SIZE)
  p.the_initial_seed = g.seed
  p.left, p.seeded, p.next = g.left, 1, g.next
  for i = 0, N - 1 do p.state[i] = g.state[i] end
  p.normal_x, p.normal_y, p.normal_rho, p.normal_is_valid = g.normal_x, g.normal_y, g.normal_rho, g.normal_valid
end

local function validSaved(p)
  if p.seeded ~= 1 or p.left < 1 or p.left > N or p.next > N or p.next + p.left > N + 1 then return false end
  if p.normal_is_valid ~= 0 and p.normal_is_valid ~= 1 then return false end
  for i = 0, N - 1 do if p.state[i] >= TWO32 then return false end end
  return true
end

local function stateTensor(op, t)
  if torch.typename(t) ~= 'torch.ByteTensor' then
    check.error(op .. ': the RNG state must be a torch.ByteTensor, got ' .. torch.type(t))
  end
  if t:nElement() ~= SAVED_SIZE then
    check.error(('%s: RNG state is wrong size (%d bytes, expected %d)'):format(op, t:nElement(), SAVED_SIZE))
  end
  if not isContiguous(t) then check.error(op .. ': RNG state needs to be contiguous') end
  bumpVersion(t)   -- setRNGState reads it, getRNGState writes it
  return ffi.cast(savedPtr, t._st._ptr + t._off)
end

-- getRNGState([gen,] [res]): the state as a ByteTensor (written into res when given).
function torch.getRNGState(a, b)
  local g, res = withGen(a, b)
  res = res or torch.ByteTensor()
  if torch.typename(res) ~= 'torch.ByteTensor' then
    check.error('getRNGState: the result must be a torch.ByteTensor, got ' .. torch.type(res))
  end
  res:resize(SAVED_SIZE)
  saveState(g, stateTensor('getRNGState', res))
  return res
end

-- setRNGState([gen,] state): restores a state from getRNGState; returns state.
function torch.setRNGState(a, b)
  local g, state = withGen(a, b)
  local p = stateTensor('setRNGState', state)
  if not validSaved(p) then check.error('setRNGState: Invalid RNG state') end
  g.seed = p.the_initial_seed
  g.left, g.next = p.left, p.next
  for i = 0, N - 1 do g.state[i] = p.state[i] end
  g.normal_x, g.normal_y, g.normal_rho, g.normal_valid = p.normal_x, p.normal_y, p.normal_rho, p.normal_is_valid
  return state
end

-- Serialisation (torch.File): the raw THGenerator bytes, as torch7 writes them.
function Generator:write(file)
  file:writeByte(torch.getRNGState(self):storage())
end

function Generator:read(file)
  local bytes = torch.ByteStorage(SAVED_SIZE)
  file:readByte(bytes)
  self._g = stateType()
  torch.setRNGState(self, torch.ByteTensor(bytes))
end

------------------------------------------------------------------------------------------------
-- tensor fills

-- (state, ...) of the generator given first to a method of tensor t, or of the default one.
-- CUDA tensors draw from the device's generator.
local function tensorGen(op, t, a, ...)
  if isGenerator(a) and t._dt.host then
    check.error(op .. ': CUDA tensors draw from the device generator (torch.cudaManualSeed), not a torch.Generator')
  end
  return withGen(a, ...)
end

local function floatOnly(op, t)
  if t._dt.integer then
    check.error(('%s: expected a floating-point tensor (Float, Double or Half), got %s'):format(op, torch.typename(t)))
  end
end

local function positive(op, name, x)
  if not (x > 0) then check.error(('%s: %s must be strictly positive, got %s'):format(op, name, tostring(x))) end
end

local function probability(op, p)
  if not (p >= 0 and p <= 1) then check.error(op .. ': p must be >= 0 and <= 1, got ' .. tostring(p)) end
end

-- The distributions with a number form torch.f([gen,] a, b) and a method x:f([gen,] a, b).
-- params: names and defaults (nil: required); validate(op, a, b) checks them.
local distributions = {
  { name = 'uniform', params = { 'a', 0, 'b', 1 }, float = true },
  { name = 'normal', params = { 'mean', 0, 'stdv', 1 }, float = true,
    validate = function(op, _, s) positive(op, 'standard deviation', s) end },
  { name = 'cauchy', params = { 'median', 0, 'sigma', 1 }, float = true },
  { name = 'logNormal', params = { 'mean', 1, 'stdv', 2 }, float = true,
    validate = function(op, _, s) positive(op, 'standard deviation', s) end },
  { name = 'exponential', params = { 'lambda', nil }, float = true,
    validate = function(op, l) positive(op, 'lambda', l) end },
  { name = 'geometric', params = { 'p', nil },
    validate = function(op, p)
      if not (p > 0 and p < 1) then check.error(op .. ': p must be > 0 and < 1, got ' .. tostring(p)) end
    end },
  { name = 'bernoulli', params = { 'p', 0.5 }, validate = probability },
}

-- The checked parameters of a distribution call (defaults filled in).
local function parameters(op, d, a, b)
  local ps = d.params
  if a == nil then a = ps[2] end
  if b == nil then b = ps[4] end
  check.number(op, a, ps[1])
  if ps[3] then check.number(op, b, ps[3]) end
  if d.validate then d.validate(op, a, b) end
  return a, b
end

local fillers = {}
for _, d in ipairs(distributions) do
  local name, draw = d.name, draws[d.name]
  fillers[name] = function(op, t, g, a, b)
    if d.float then floatOnly(op, t) end
    a, b = parameters(op, d, a, b)
    backend.of(t).random(name, t, a, b, g)
    return t
  end
  torch[name] = function(x, ...)
    if isTensor(x) then return x[name](x, ...) end
    local g, a, b = withGen(x, ...)
    a, b = parameters(name, d, a, b)
    return draw(g, a, b)
  end
  torch._method(name, function(t, ...)
    local g, a, b = tensorGen(name, t, ...)
    return fillers[name](name, t, g, a, b)
  end)
end

-- x:bernoulli([gen,] p) with p a number or a tensor of probabilities (one per element, of
-- either device).
local bernoulliNumber = fillers.bernoulli
fillers.bernoulli = function(op, t, g, p)
  if not isTensor(p) then return bernoulliNumber(op, t, g, p) end
  check.sameElements(op, t, p)
  if p._dt.half then p = p:float() end
  if numel(p) > 0 then
    local lo, hi = backend.of(p).minmax(p)
    probability(op, lo)
    probability(op, hi)
  end
  backend.of(t).random('bernoulli', t, p, nil, g)
  return t
end

-- x:random([gen,] [a,] [b]): a..b, 1..a, or the whole draw reduced as torch7 does per type (a
-- draw has 32 bits: the types holding more take it whole).
local typeRange = { Byte = 256, Char = 128, Short = 32768, Int = 2 ^ 31, Long = TWO32,
                    Float = 2 ^ 24 + 1, Double = TWO32, Half = 2 ^ 11 + 1 }

local function truncate(x) return x >= 0 and floor(x) or -floor(-x) end

-- The (range, base) of random(), random(b) or random(a, b).
local function randomBounds(op, a, b, wholeRange)
  if a == nil then return wholeRange, 0 end
  check.number(op, a, b == nil and 'upper bound' or 'lower bound')
  if b == nil then
    a = truncate(a)
    if a <= 0 then check.error(op .. ': upper bound must be strictly positive, got ' .. a) end
    return a, 1
  end
  check.number(op, b, 'upper bound')
  a, b = truncate(a), truncate(b)
  if b < a then check.error(('%s: upper bound must be larger than lower bound, got [%d, %d]'):format(op, a, b)) end
  return b + 1 - a, a
end

torch._method('random', function(t, ...)
  local g, a, b = tensorGen('random', t, ...)
  local range, base = randomBounds('random', a, b, typeRange[(t._dt.host or t._dt).name])
  backend.of(t).random('random', t, base, base + range - 1, g)
  return t
end)

function torch.random(x, ...)
  if isTensor(x) then return x:random(...) end
  local g, a, b = withGen(x, ...)
  if a == nil then return random32(g) end
  return mt.ranged(g, randomBounds('random', a, b))
end

------------------------------------------------------------------------------------------------
-- rand, randn, randperm

-- The optional leading (res, gen) of ([res,] [gen,] ...): res or nil, the generator state, and
-- how many arguments they took.
local function leading(a, b)
  local res, skip = nil, 0
  if isTensor(a) then res, skip, a = a, 1, b end
  if isGenerator(a) then return res, a._g, skip + 1 end
  return res, default._g, skip
end

-- rand([res,] [gen,] sizes...) / randn: res resized to sizes, filled uniform on [0, 1) / N(0, 1).
for op, dist in pairs({ rand = 'uniform', randn = 'normal' }) do
  torch[op] = function(...)
    local res, g, skip = leading(...)
    local sizes = torch._sizesFrom(op, select(skip + 1, ...))
    res = res or torch.Tensor()
    floatOnly(op, res)
    res:resize(sizes)
    return fillers[dist](op, res, g)
  end
  torch._method(op, function(t, ...) return torch[op](t, ...) end)
end

-- randperm([res,] [gen,] n): a random permutation of 1..n (torch7's swap sequence).
function torch.randperm(...)
  local res, g, skip = leading(...)
  local n = select(skip + 1, ...)
  res = res or torch.Tensor()
  check.number('randperm', n, 'n')
  if n < 1 or n ~= floor(n) then check.error('randperm: n must be a strictly positive integer, got ' .. tostring(n)) end
  local perm = torch.DoubleTensor(n)
  local p = perm._st._ptr
  for i = 0, n - 1 do p[i] = i + 1 end
  for i = 0, n - 2 do
    local z = random32(g) % (n - i) + i
    p[i], p[z] = p[z], p[i]
  end
  return res:resize(n):copy(perm)
end
torch._method('randperm', function(t, ...) return torch.randperm(t, ...) end)

------------------------------------------------------------------------------------------------
-- multinomial sampling

-- The rows of a 1D/2D probability tensor as normalised cumulative sums (double array, row
-- after row), the row and category counts, and the fewest positive entries in a row.
local function cumulativeRows(op, probs)
  if probs._dt.half then probs = probs:float() end
  local P = probs:double()
  local nd = P:dim()
  local rows, k = nd == 1 and 1 or P._sz[1], P._sz[nd]
  local rs, cs = nd == 2 and P._str[1] or 0, P._str[nd]
  local cum = ffi.new('double[?]', math.max(rows * k, 1))
  local fewest = k
  for r = 0, rows - 1 do
    local sum, positive, o = 0, 0, P._off + r * rs
    for j = 0, k - 1 do
      local v = P._st._ptr[o + j * cs]
      if not (v >= 0 and v < math.huge) then
        check.error(('%s: invalid multinomial distribution (probability %s in row %d, column %d)'):format(
          op, tostring(v), r + 1, j + 1))
      end
      if v > 0 then positive = positive + 1 end
      sum = sum + v
      cum[r * k + j] = sum
    end
    if not (sum > 0) then
      check.error(('%s: invalid multinomial distribution (sum of probabilities <= 0 in row %d)'):format(op, r + 1))
    end
    for j = 0, k - 1 do cum[r * k + j] = cum[r * k + j] / sum end
    fewest = math.min(fewest, positive)
  end
  return cum, rows, k, fewest
end

-- First slot whose cumulative probability reaches u (binary search, as torch7).
local function search(cum, base, k, u)
  local left, right = 0, k
  while right > left do
    local mid = left + floor((right - left) / 2)
    if cum[base + mid] < u then left = mid + 1 else right = mid end
  end
  return left
end

-- Takes slot s's mass out of a row's cumulative distribution and renormalises it.
local function removeSlot(cum, base, k, s)
  local mass = cum[base + s] - (s > 0 and cum[base + s - 1] or 0)
  local rest = 1 - mass
  for j = 0, k - 1 do
    local v = cum[base + j]
    if j >= s then v = v - mass end
    cum[base + j] = v / rest
  end
end

-- multinomial([res,] [gen,] probs, n [, replacement]): n category indices (1-based) drawn from
-- each row of probs (1D: a vector of n; 2D: rows x n) into a LongTensor. probs need not be
-- normalised; without replacement a row needs at least n positive entries.
function torch.multinomial(...)
  local op = 'multinomial'
  local args, i = { ... }, 1
  local res
  if isTensor(args[1]) and (isTensor(args[2]) or isGenerator(args[2])) then res, i = args[1], 2 end
  local g = default._g
  if isGenerator(args[i]) then g, i = args[i]._g, i + 1 end
  local probs, n, replacement = args[i], args[i + 1], args[i + 2]
  check.tensorOf(op, probs, 'probs')
  if res and torch.typename(res) ~= 'torch.LongTensor' then
    check.error(op .. ': the result must be a torch.LongTensor, got ' .. torch.typename(res))
  end
  if probs:dim() ~= 1 and probs:dim() ~= 2 then
    check.error(op .. ': probs must be a 1D or 2D tensor, got ' .. probs:dim() .. 'D')
  end
  check.number(op, n, 'n_sample')
  if n < 1 or n ~= floor(n) then check.error(op .. ': n_sample must be a positive integer, got ' .. n) end
  if replacement ~= nil and type(replacement) ~= 'boolean' then
    check.error(op .. ': replacement must be a boolean, got ' .. torch.type(replacement))
  end
  local k = probs:size(probs:dim())
  if not replacement and n > k then
    check.error(('%s: cannot sample n_sample > prob_dist:size(%d) samples without replacement (%d > %d)'):format(
      op, probs:dim(), n, k))
  end
  local cum, rows, _, fewest = cumulativeRows(op, probs)
  if not replacement and n > fewest then
    check.error(('%s: cannot sample %d categories without replacement from a row with only %d positive probabilities'):format(
      op, n, fewest))
  end
  local out = torch.LongTensor(rows * n)
  local o = out._st and out._st._ptr
  for r = 0, rows - 1 do
    local base = r * k
    for j = 0, n - 1 do
      local u = uniform01(g)
      cum[base + k - 1] = 1
      local s = search(cum, base, k, u)
      o[r * n + j] = s + 1
      if not replacement then removeSlot(cum, base, k, s) end
    end
  end
  res = res or torch.LongTensor()
  if probs:dim() == 1 then res:resize(n) else res:resize(rows, n) end
  return res:copy(out)
end
torch._method('multinomial', function(t, ...) return torch.multinomial(t, ...) end)

-- The (J, q) of an alias table given as a state table {J, q} or as two arguments.
local function aliasTable(a, b)
  if type(a) == 'table' and not isTensor(a) then return a[1], a[2] end
  return a, b
end

-- Walker's alias method. multinomialAliasSetup(probs[, state]) (state = {J, q}, or J, q)
-- returns the state {J, q}: J (LongTensor) the 1-based alias of each category, q (probs' type)
-- the chance of keeping the category drawn. multinomialAlias([gen,] output, state) fills
-- output with category indices. Unlike torch7, probs need not sum to 1, and categories left
-- without an alias point to themselves with q = 1, so the draws follow probs exactly.
function torch.multinomialAliasSetup(probs, a, b)
  local op = 'multinomialAliasSetup'
  check.tensorOf(op, probs, 'probs')
  if probs:dim() ~= 1 then check.error(op .. ': probs must be a 1D tensor, got ' .. probs:dim() .. 'D') end
  local J, q = aliasTable(a, b)
  if J ~= nil and torch.typename(J) ~= 'torch.LongTensor' then
    check.error(op .. ': J must be a torch.LongTensor, got ' .. torch.type(J))
  end
  if q ~= nil then check.tensorOf(op, q, 'q'); check.sameType(op, probs, q) end
  local cum, _, k = cumulativeRows(op, probs)
  local jd, qd = torch.LongTensor(k), torch.DoubleTensor(k)
  local alias, qs = jd._st._ptr, qd._st._ptr
  local small, large = ffi.new('int64_t[?]', k), ffi.new('int64_t[?]', k)
  local ns, nl = 0, 0
  for i = 0, k - 1 do
    qs[i] = k * (cum[i] - (i > 0 and cum[i - 1] or 0))
    alias[i] = i + 1
    if qs[i] < 1 then small[ns] = i; ns = ns + 1 else large[nl] = i; nl = nl + 1 end
  end
  -- pair each small category with a large one that tops it up to 1
  while ns > 0 and nl > 0 do
    local s, l = small[ns - 1], large[nl - 1]
    alias[s] = l + 1
    qs[l] = qs[l] - (1 - qs[s])
    if qs[l] < 1 then small[ns - 1] = l; nl = nl - 1 else ns = ns - 1 end
  end
  for j = 0, ns - 1 do qs[small[j]] = 1 end   -- left over by rounding: keep themselves
  for j = 0, nl - 1 do qs[large[j]] = 1 end
  J = (J or torch.LongTensor()):resize(k):copy(jd)
  q = (q or probs.new()):resize(k):copy(qd)
  if type(a) == 'table' and not isTensor(a) then a[1], a[2] = J, q; return a end
  return { J, q }
end

function torch.multinomialAlias(...)
  local op = 'multinomialAlias'
  local args, i, g = { ... }, 1, default._g
  if isGenerator(args[1]) then g, i = args[1]._g, 2 end
  local output = args[i]
  local J, q = aliasTable(args[i + 1], args[i + 2])
  if torch.typename(output) ~= 'torch.LongTensor' then
    check.error(op .. ': output must be a torch.LongTensor, got ' .. torch.type(output))
  end
  if torch.typename(J) ~= 'torch.LongTensor' or J:dim() ~= 1 or J:nElement() == 0 then
    check.error(op .. ': J must be a non-empty 1D torch.LongTensor (see multinomialAliasSetup)')
  end
  check.tensorOf(op, q, 'q')
  check.sameElements(op, J, q)
  local k = J:nElement()
  local js, qs = J:double():contiguous(), (q._dt.half and q:float() or q):double():contiguous()
  local jp, qp = js._st._ptr + js._off, qs._st._ptr + qs._off
  for i = 0, k - 1 do
    if not (jp[i] >= 1 and jp[i] <= k and qp[i] >= 0 and qp[i] <= 1) then
      check.error(('%s: invalid alias table (J must hold indices 1..%d and q probabilities)'):format(op, k))
    end
  end
  local n = output:nElement()
  if n == 0 then return output end
  local out = torch.LongTensor(n)
  local o = out._st._ptr
  for i = 0, n - 1 do
    local slot = floor(draws.uniform(g, 0, k))
    if draws.bernoulli(g, qp[slot]) == 1 then o[i] = slot + 1 else o[i] = jp[slot] end
  end
  return output:copy(out)
end

return Generator
