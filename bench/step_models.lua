-- The models and training steps of bench/real_models.py's rows, for the Lua benches that time
-- them pass by pass (bench/serial_passes.lua, bench/serial_ab.lua):
--   local m = dofile('bench/step_models.lua')(NAME, BATCH)
-- NAME: resnet18, lenet, dcgan (bench/real_models.lua) or mlp (784-512-512-10). Gives the model
-- (training mode, no gradient for the input batch, as bench/real_models.lua's trainer), x, y,
-- the criterion, params and grads (getParameters; nil for dcgan, whose row is a forward in
-- training mode).
require 'nn'
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local models = dofile(here .. 'real_models.lua')
local shapes = { lenet = { 1, 28, 28 }, mlp = { 784 }, dcgan = { 100, 1, 1 }, resnet18 = { 3, 224, 224 } }
local classes = { lenet = 10, mlp = 10, resnet18 = 1000 }

return function(name, batch)
  assert(shapes[name], 'step_models: unknown model ' .. tostring(name))
  torch.manualSeed(1)
  local m = { name = name, model = models[name]():float() }
  m.x = torch.FloatTensor(batch, unpack(shapes[name])):normal()
  m.y = classes[name] and torch.LongTensor(batch):random(1, classes[name])
  m.criterion = name == 'resnet18' and nn.CrossEntropyCriterion():float() or nn.ClassNLLCriterion():float()
  m.model:training()
  if name ~= 'dcgan' then
    m.model.modules[1].gradInput = nil
    m.params, m.grads = m.model:getParameters()
  end
  -- one step as the bench's: zero, forward, criterion, backward, SGD update (DCGAN: forward)
  function m.step()
    if name == 'dcgan' then return m.model:forward(m.x) end
    m.grads:zero()
    local out = m.model:forward(m.x)
    m.criterion:forward(out, m.y)
    m.model:backward(m.x, m.criterion:backward(out, m.y))
    m.params:add(-0.01, m.grads)
  end
  return m
end
