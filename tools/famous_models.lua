-- Builds one famous model (from its public definition file, where it has one) and checks it end
-- to end; run by tools/famous_models.py as `luabridge th famous_models.lua NAME OUTDIR` in a scratch
-- copy of the model's repository (an empty folder for the models built here alone). Runs a training
-- step's forward and backward, saves the model with torch.save after clearState (as training scripts
-- do), loads it back with torch.load and requires the same output. Writes OUTDIR/model.t7, the
-- flat parameters as raw float32 (OUTDIR/params.f32) for the Python reader's check and, for a
-- tensor input, the input and the evaluation output (input.f32, output.f32), and prints one
-- `famous key=value ...` line.
require 'nn'

local name, outdir = arg[1], arg[2]

local function sizes(t)
  if type(t) == 'table' then   -- several inputs: {a, b} as AxB+CxD
    local each = {}
    for i, x in ipairs(t) do each[i] = sizes(x) end
    return table.concat(each, '+')
  end
  return table.concat(t:size():totable(), 'x')
end

-- inputs in float: index tensors stay as they are
local function float_input(x)
  if type(x) == 'table' then
    local each = {}
    for i, v in ipairs(x) do each[i] = float_input(v) end
    return each
  end
  return torch.typename(x) == 'torch.DoubleTensor' and x:float() or x
end

local function millis(fn)
  local timer = torch.Timer()
  local result = fn()
  return result, timer:time().real * 1000
end

-- train.lua's `cmd:option` defaults, read from its source (quoted strings and numbers)
local function train_lua_defaults(path)
  local text = assert(io.open(path)):read('*a')
  local opt = {}
  for key, value in text:gmatch("cmd:option%('%-([%w_]+)',%s*'([^']*)'") do opt[key] = value end
  for key, value in text:gmatch("cmd:option%('%-([%w_]+)',%s*([%d%.e%-]+)%s*[,%)]") do opt[key] = tonumber(value) end
  return opt
end

local builders = {}

-- OpenFace: train.lua sets `opt` and dofile's the definition, which defines imgDim and createModel
function builders.openface()
  require 'dpnn'
  opt = {embSize = 128}
  dofile('models/openface/nn4.small2.def.lua')
  local net = createModel()
  local function unit_rows(y)
    local deviation = (y:norm(2, 2) - 1):abs():max()
    return deviation < 1e-5, string.format('max |norm-1| %.1e', deviation)
  end
  return {model = net, input = torch.rand(2, 3, imgDim, imgDim), check = unit_rows}
end

-- fast-neural-style: models.lua's build_model with train.lua's options; train.lua pads the input
-- lazily when 'reflect-start' padding made the output smaller (its f(x)), as done here
local function transform_net(padding_type)
  local opt = train_lua_defaults('train.lua')
  opt.padding_type = padding_type or opt.padding_type
  local models = require 'fast_neural_style.models'
  local model = models.build_model(opt)
  local function same_size(y, x)
    return y:isSameSizeAs(x), 'output ' .. sizes(y) .. ' for input ' .. sizes(x)
  end
  return {model = model, input = torch.rand(1, 3, 128, 128), check = same_size, checkpoint = true, opt = opt,
          first_forward = function(m, x)
            local out = m:forward(x)
            if opt.padding_type == 'reflect-start' and x:size(3) ~= out:size(3) then
              local ph, pw = (x:size(3) - out:size(3)) / 2, (x:size(4) - out:size(4)) / 2
              m:insert(nn.SpatialReflectionPadding(pw, pw, ph, ph):float(), 1)
              out = m:forward(x)
            end
            return out
          end}
end

builders['fast-neural-style'] = function() return transform_net() end
builders['fast-neural-style-reflect'] = function() return transform_net('reflect') end

-- A character language model in char-rnn's default sizes (65 symbols, 128 units, 50 steps of
-- 16 sequences): LookupTable, Sequencer(FastLSTM, Linear, LogSoftMax), SequencerCriterion. It trains
-- a few SGD steps on a repeating text first; the check requires the loss to fall at every step.
builders['rnn-lm'] = function()
  require 'rnn'
  torch.manualSeed(3)
  local vocab, hidden, steps, batch = 65, 128, 50, 16
  local lm = nn.Sequential()
    :add(nn.LookupTable(vocab, hidden))
    :add(nn.Sequencer(nn.Sequential():add(nn.FastLSTM(hidden, hidden)):add(nn.Linear(hidden, vocab)):add(nn.LogSoftMax())))
    :float()
  local crit = nn.SequencerCriterion(nn.ClassNLLCriterion()):float()
  local text = torch.range(0, steps * batch):apply(function(i) return i * 7 % 13 + 1 end)   -- period 13
  local input = text:narrow(1, 1, steps * batch):view(batch, steps):t():contiguous():long()
  local target = text:narrow(1, 2, steps * batch):view(batch, steps):t():contiguous():float()
  local params, grads = lm:getParameters()
  local losses = {}
  for step = 1, 4 do
    grads:zero()
    local out = lm:forward(input)
    losses[step] = crit:forward(out, target)
    lm:backward(input, crit:backward(out, target))
    params:add(-0.05, grads)   -- the criterion sums 50 steps' losses
  end
  local function falls(y)
    local total = y:clone():exp():sum(3)   -- each step's probabilities sum to 1
    local ok = (total - 1):abs():max() < 1e-4
    for step = 2, #losses do if losses[step] >= losses[step - 1] then ok = false end end
    return ok, string.format('loss %.3f -> %.3f in %d steps', losses[1], losses[#losses], #losses)
  end
  return {model = lm, input = input, check = falls}
end

-- A colorization-style two-input gModule (after Iizuka et al.): a luminance image through strided
-- convolutions, a global feature vector through Linear layers replicated over the feature map,
-- fused by a 1x1 convolution and upsampled to two chrominance planes in (-1, 1).
builders.colorization = function()
  require 'nngraph'
  torch.manualSeed(4)
  local size, features = 64, 128
  local lum, glob = nn.Identity()(), nn.Identity()()
  local low = nn.ReLU()(nn.SpatialConvolution(1, 32, 3, 3, 2, 2, 1, 1)(lum))
  local mid = nn.ReLU()(nn.SpatialConvolution(32, 64, 3, 3, 2, 2, 1, 1)(low))   -- 64 x size/4 x size/4
  local g = nn.ReLU()(nn.Linear(64, 64)(nn.ReLU()(nn.Linear(features, 64)(glob))))
  local spread = nn.Replicate(size / 4, 3)(nn.Replicate(size / 4, 2)(g))
  local fused = nn.ReLU()(nn.SpatialConvolution(128, 64, 1, 1)(nn.JoinTable(1)({mid, spread})))
  local ab = nn.Tanh()(nn.SpatialConvolution(64, 2, 3, 3, 1, 1, 1, 1)(nn.SpatialUpSamplingNearest(4)(fused)))
  local function chrominance(y)
    return y:dim() == 3 and y:size(1) == 2 and y:size(2) == size and y:abs():max() < 1,
           'output ' .. sizes(y)
  end
  return {model = nn.gModule({lum, glob}, {ab}), input = {torch.rand(1, size, size), torch.randn(features)},
          check = chrominance, checkpoint = true}
end

local build = builders[name]
if not build then error('famous_models.lua: unknown model ' .. tostring(name)) end
local case = build()
local model, x = case.model:float(), float_input(case.input)
local params = model:getParameters()

model:training()
local forward = case.first_forward or function(m, input) return m:forward(input) end
forward(model, x)   -- the first pass allocates buffers (and completes the lazy padding)
local y, forward_ms = millis(function() return forward(model, x) end)
local gradOutput = y:clone():normal()
local _, backward_ms = millis(function() model:zeroGradParameters(); return model:backward(x, gradOutput) end)

model:evaluate()
local before = model:forward(x):clone()
local path = paths.concat(outdir, 'model.t7')
local loaded, save_load_ms = millis(function()
  model:clearState()   -- as OpenFace's and fast-neural-style's train.lua do before saving
  if case.checkpoint then
    -- as fast_neural_style.lua reads a checkpoint: a table whose `model` it evaluates and casts
    torch.save(path, {model = model, opt = case.opt})
    local checkpoint = torch.load(path)
    local m = checkpoint.model
    m:evaluate()
    return m:type('torch.FloatTensor')
  end
  torch.save(path, model)
  return torch.load(path)
end)
-- The reloaded model must compute exactly what the original does. Both run on one thread here:
-- a product's thread count is chosen per call from the free CPUs, and another split of a sum
-- rounds differently. And both have planned themselves (nn.plans): a container's first forward
-- runs layer by layer, later ones as one fused plan, whose float32 sums round differently.
local threads = torch.getnumthreads()
torch.setnumthreads(1)
loaded:forward(x)
local again = model:forward(x):clone()
local after = loaded:forward(x)
torch.setnumthreads(threads)
local reload_diff = (after - again):abs():max()

local function write_floats(file, t)
  local raw = torch.DiskFile(paths.concat(outdir, file), 'w'):binary()
  raw:writeFloat(t:contiguous():storage())
  raw:close()
end
write_floats('params.f32', params)
if torch.typename(x) == 'torch.FloatTensor' then   -- for a forward from what t7.read finds
  write_floats('input.f32', x)
  write_floats('output.f32', before)
end

local ok, note = case.check(before, x)
print(string.format('famous input=%s output=%s params=%d forward_ms=%.1f backward_ms=%.1f save_load_ms=%.1f ' ..
                    'reload_diff=%g check=%s checkpoint=%s note=%s',
                    sizes(x), sizes(before), params:nElement(), forward_ms, backward_ms, save_load_ms,
                    reload_diff, ok and 'ok' or 'failed', case.checkpoint and 'model' or '', note:gsub(' ', '_')))
