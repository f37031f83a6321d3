-- The CPU random numbers: torch7's Mersenne Twister (MT19937) streams, the draws, and the tensor
-- fills behind random.lua's front end, registered as the op random(name, r, p1, p2, gen) (see
-- lua/torch/README.md, "The front end and the op table").
--
-- The streams are torch7's THRandom bit for bit: init_genrand seeding, 32-bit draws, uniform
-- = draw / 2^32, normal by Box-Muller keeping the second value for the next call, and the same
-- formulas for exponential, cauchy, logNormal, geometric and bernoulli; tensors are filled in
-- row-major order as TH_TENSOR_APPLY does. So a seed gives torch7's numbers on every run,
-- thread and machine. A generator's state g is a luabridge_mt19937 cdata (random.lua's
-- torch.Generator holds one).
local ffi = require 'ffi'
local bit = require 'bit'
local torch = require 'torch.env'
local apply = require 'torch.backend.cpu.apply'

local band, bor, bxor, rshift, lshift, tobit = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift, bit.tobit
local min, floor, log, exp, sqrt, cos, sin, tan, pi = math.min, math.floor, math.log, math.exp, math.sqrt, math.cos,
  math.sin, math.tan, math.pi
local isContiguous = apply.isContiguous

local N, M = 624, 397
local TWO32 = 4294967296

ffi.cdef [[
typedef struct {
  uint32_t state[624];
  int32_t left, next;      /* draws left before the next twist; index of the next word */
  int64_t seed;
  double normal_x, normal_y, normal_rho;
  int32_t normal_valid;    /* 1: the next normal is the cached sine half */
} luabridge_mt19937;
]]
local stateType = ffi.typeof('luabridge_mt19937')

------------------------------------------------------------------------------------------------
-- the generator (g: a luabridge_mt19937 cdata)

-- (a * x) mod 2^32 for a 32-bit constant a, exactly (the halves keep every product below 2^53).
local function mul32(a, x)
  local hi, lo = floor(a / 65536), a % 65536
  return tobit((hi * x % 65536) * 65536 + lo * x)
end

local function seedState(g, seed)
  ffi.fill(g, ffi.sizeof(stateType))   -- also forgets the cached normal
  g.seed = seed
  local s = g.state
  s[0] = seed % TWO32
  for j = 1, N - 1 do
    local prev = s[j - 1]
    s[j] = tobit(mul32(1812433253, bxor(prev, rshift(prev, 30))) + j)
  end
  g.left, g.next = 1, 0
end

local function twist(u, v)
  local y = rshift(bor(band(u, 0x80000000), band(v, 0x7fffffff)), 1)
  if band(v, 1) ~= 0 then y = bxor(y, 0x9908b0df) end
  return y
end

local function nextState(g)
  local s = g.state
  for j = 0, N - M - 1 do s[j] = bxor(s[j + M], twist(s[j], s[j + 1])) end
  for j = N - M, N - 2 do s[j] = bxor(s[j + M - N], twist(s[j], s[j + 1])) end
  s[N - 1] = bxor(s[M - 1], twist(s[N - 1], s[0]))
  g.left, g.next = N, 0
end

-- The next 32-bit draw, in [0, 2^32).
local function random32(g)
  local left = g.left - 1
  if left == 0 then nextState(g) else g.left = left end
  local k = g.next
  g.next = k + 1
  local y = g.state[k]
  y = bxor(y, rshift(y, 11))
  y = bxor(y, band(lshift(y, 7), 0x9d2c5680))
  y = bxor(y, band(lshift(y, 15), 0xefc60000))
  y = bxor(y, rshift(y, 18))
  return y % TWO32
end

local function uniform01(g) return random32(g) * (1 / TWO32) end

------------------------------------------------------------------------------------------------
-- draws: draw(g, a, b) with the distribution's parameters

local function uniform(g, a, b) return uniform01(g) * (b - a) + a end

local function normal(g, mean, std)
  if g.normal_valid == 0 then
    local x, y = uniform01(g), uniform01(g)
    local rho = sqrt(-2 * log(1 - y))
    g.normal_x, g.normal_y, g.normal_rho, g.normal_valid = x, y, rho, 1
    return rho * cos(2 * pi * x) * std + mean
  end
  g.normal_valid = 0
  return g.normal_rho * sin(2 * pi * g.normal_x) * std + mean
end

local function exponential(g, lambda) return -1 / lambda * log(1 - uniform01(g)) end
local function cauchy(g, median, sigma) return median + sigma * tan(pi * (uniform01(g) - 0.5)) end
local function logNormal(g, mean, std) return exp(normal(g, mean, std)) end
-- P(k) = (1 - p) p^(k-1), k >= 1 (torch7's parametrisation)
local function geometric(g, p) return floor(log(1 - uniform01(g)) / log(p)) + 1 end
-- 1 when the draw u <= p, else 0, without a branch (a coin-flip branch costs LuaJIT a side exit
-- per element): p - u lies in (-1, 1], so floor(p - u) + 1 is 0, 1, or 2 for u = 0, p = 1.
local function bernoulli(g, p) return min(floor(p - uniform01(g)) + 1, 1) end
-- random draws reduced as torch7 does: draw % range + base
local function ranged(g, range, base) return random32(g) % range + base end

-- A loop p[i] = draw(g, a, b) compiled on its own for each draw, so that each gets its own trace.
local function compileLoop(draw, body)
  local src = 'local draw = ...\nreturn function(p, n, g, a, b, q)\n  for i = 0, n - 1 do ' .. body .. ' end\nend'
  return assert(loadstring(src, '=random fill'))(draw)
end

-- Fills t in row-major order (through a contiguous buffer when t is strided or Half).
local function fill(t, loop, g, a, b, q)
  local n = t:nElement()
  if n == 0 then return t end
  if t._dt.half or not isContiguous(t) then
    local tmp = torch[(t._dt.half and 'Float' or t._dt.name) .. 'Tensor'](n)
    loop(tmp._st._ptr, n, g, a, b, q)
    return t:copy(tmp)
  end
  loop(t._st._ptr + t._off, n, g, a, b, q)
  return t
end

-- The distributions by name: draw(g, a, b) with their parameters.
local DRAWS = { uniform = uniform, normal = normal, exponential = exponential, cauchy = cauchy,
                logNormal = logNormal, geometric = geometric, bernoulli = bernoulli }
local LOOPS = {}
for name, draw in pairs(DRAWS) do LOOPS[name] = compileLoop(draw, 'p[i] = draw(g, a, b)') end
local bernoulliByElement = compileLoop(bernoulli, 'p[i] = draw(g, q[i])')
local randomLoop = compileLoop(ranged, 'p[i] = draw(g, a, b)')

-- Large Bernoulli masks (Dropout's: x:bernoulli(p) with a number p on a contiguous Float or
-- Double tensor of at least masks.from elements) are drawn in Python on the threads
-- blas.threadsFor gives (luabridge/providers/torch_cpu/blocked.py): numpy's PCG64 streams, one
-- per chunk of 65536 elements, chunk i seeded with SeedSequence(s, spawn_key=(i,)) where s is ONE
-- 32-bit draw of the torch generator. The mask is deterministic under torch.manualSeed and the
-- same on any thread count, but it is not torch7's stream (element i is 1 when numpy's uniform
-- draw u_i < p; torch7 draws u_i from MT19937, 1 when u_i <= p), and the generator advances by
-- one draw rather than n. Smaller or strided tensors keep torch7's stream bit for bit;
-- masks.enabled = false (or LUABRIDGE_BLOCKED=0) keeps it for every tensor.
local memory = require 'torch.core.memory'
local blas = require 'torch.backend.cpu.blas'
local masks = {
  enabled = os.getenv('LUABRIDGE_BLOCKED') ~= '0',
  -- the least elements (one chunk: numpy's draws take a quarter of the Lua loop's time there,
  -- bench/blocked.py) and the least per thread
  from = 65536, least = 65536,
}
local intptr = ffi.typeof('intptr_t')
local function threadedMask(r, p, g)
  local py = memory.py
  if not (masks.enabled and py.blocked_bernoulli) or r._dt.integer or r._dt.half or not isContiguous(r) then
    return false
  end
  local n = r:nElement()
  if n < masks.from or n == 0 then return false end   -- an empty tensor has no storage
  local size = r._dt.size
  local addr = tonumber(ffi.cast(intptr, r._st._ptr)) + r._off * size
  if addr % size ~= 0 then return false end
  local seed = random32(g)
  return py.blocked_bernoulli(r._dt.name, addr, n, p, seed, blas.threadsFor(n, masks.least, true))
end

require('torch.backend').register('cpu', {
  -- r filled by generator g with draws of distribution name (parameters p1, p2): for random,
  -- integers in [p1, p2] (a 32-bit draw reduced); for bernoulli, p1 may be a tensor of one
  -- probability per element
  random = function(name, r, p1, p2, g)
    if name == 'random' then return fill(r, randomLoop, g, p2 - p1 + 1, p1) end
    if name == 'bernoulli' and type(p1) == 'number' and threadedMask(r, p1, g) then return r end
    if name == 'bernoulli' and torch.isTensor(p1) then
      local probs = p1:double():contiguous()
      return fill(r, bernoulliByElement, g, nil, nil, probs._st and probs._st._ptr + probs._off)
    end
    return fill(r, LOOPS[name], g, p1, p2)
  end,
})

-- The streams themselves, for random.lua's torch.Generator and scalar draws (torch.random,
-- torch.uniform, ...): the CPU generator's state and draws, reached through the op table.
local mt19937 = {
  N = N, TWO32 = TWO32, stateType = stateType, seed = seedState, random32 = random32,
  uniform01 = uniform01, ranged = ranged, draws = DRAWS, masks = masks,
}
require('torch.backend').register('cpu', { mt19937 = mt19937 })
return mt19937
