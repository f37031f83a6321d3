-- The CUDA op table's random fills, marshalled to the array module's generator
-- (luabridge/backend/cuda.py's random, seed); the methods are random.lua's, the one front end.
local C = require 'torch.backend.cuda.core'
local backend = require 'torch.backend'
local torch, check, call = C.torch, C.check, C.call

backend.register('cuda', {
  -- r filled with draws of distribution name (p1 a number, or for bernoulli a tensor of
  -- probabilities on either device); random: integers in [p1, p2]. (No torch.Generator here.)
  random = function(name, r, p1, p2) call('random', name, r, p1, p2) end,
  seed = function(v) call('seed', v) end,
})

for _, name in ipairs { 'uniform', 'normal', 'cauchy', 'logNormal', 'exponential', 'geometric', 'bernoulli',
                        'random' } do
  C.Methods[name] = C.Tensor[name]
end

-- cudaManualSeed(seed): seeds the device's generator.
function torch.cudaManualSeed(seed)
  check.number('cudaManualSeed', seed, 'seed')
  backend.cuda.seed(seed)
end
