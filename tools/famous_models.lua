-- Builds one famous model from its public definition file and checks it end to end; run by
-- tools/famous_models.py as `luabridge th famous_models.lua NAME OUTDIR` in a scratch copy of
-- the model's repository. Runs a training step's forward and backward, saves the model with torch.save,
-- loads it back with torch.load and requires the same output. Writes OUTDIR/model.t7 and the
-- flat parameters as raw float32 (OUTDIR/params.f32) for the Python reader's check, and prints
-- one `famous key=value ...` line.
require 'nn'

local name, outdir = arg[1], arg[2]

local function sizes(t)
  return table.concat(t:size():totable(), 'x')
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

local build = builders[name]
if not build then error('famous_models.lua: unknown model ' .. tostring(name)) end
local case = build()
local model, x = case.model:float(), case.input:float()
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
-- rounds differently.
local threads = torch.getnumthreads()
torch.setnumthreads(1)
local again = model:forward(x):clone()
local after = loaded:forward(x)
torch.setnumthreads(threads)
local reload_diff = (after - again):abs():max()

local raw = torch.DiskFile(paths.concat(outdir, 'params.f32'), 'w'):binary()
raw:writeFloat(params:storage())
raw:close()

local ok, note = case.check(before, x)
print(string.format('famous input=%s output=%s params=%d forward_ms=%.1f backward_ms=%.1f save_load_ms=%.1f ' ..
                    'reload_diff=%g check=%s checkpoint=%s note=%s',
                    sizes(x), sizes(before), params:nElement(), forward_ms, backward_ms, save_load_ms,
                    reload_diff, ok and 'ok' or 'failed', case.checkpoint and 'model' or '', note:gsub(' ', '_')))
