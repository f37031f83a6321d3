-- CUDA random numbers (argument forms of core.lua).
local C = require 'torch.backend.cuda.core'
local torch, check, py, call, def, floatOnly = C.torch, C.check, C.py, C.call, C.def, C.floatOnly

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
