-- The models bench/real_models.py times, written the way their Torch7 projects build them, and
-- the Lua loops that time them. Weights start as those projects start them; the PyTorch twins
-- copy them, in the order model:parameters() lists them.
require 'nn'
require 'nngraph'

local models = {}

-- ResNet-18 for 224x224 images, after fb.resnet.torch's models/resnet.lua: basic blocks, type-B
-- shortcuts (a 1x1 convolution and batch norm where the width changes), convolutions without
-- bias, MSR initialisation.
function models.resnet18(classes)
  local width = 64
  local function block(n, stride)
    local from = width
    width = n
    local body = nn.Sequential()
      :add(nn.SpatialConvolution(from, n, 3, 3, stride, stride, 1, 1):noBias())
      :add(nn.SpatialBatchNormalization(n))
      :add(nn.ReLU(true))
      :add(nn.SpatialConvolution(n, n, 3, 3, 1, 1, 1, 1):noBias())
      :add(nn.SpatialBatchNormalization(n))
    local shortcut = nn.Identity()
    if from ~= n then
      shortcut = nn.Sequential()
        :add(nn.SpatialConvolution(from, n, 1, 1, stride, stride):noBias())
        :add(nn.SpatialBatchNormalization(n))
    end
    return nn.Sequential()
      :add(nn.ConcatTable():add(body):add(shortcut))
      :add(nn.CAddTable(true))
      :add(nn.ReLU(true))
  end
  local function stage(n, stride)
    return nn.Sequential():add(block(n, stride)):add(block(n, 1))
  end
  local model = nn.Sequential()
    :add(nn.SpatialConvolution(3, 64, 7, 7, 2, 2, 3, 3):noBias())
    :add(nn.SpatialBatchNormalization(64))
    :add(nn.ReLU(true))
    :add(nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1))
    :add(stage(64, 1)):add(stage(128, 2)):add(stage(256, 2)):add(stage(512, 2))
    :add(nn.SpatialAveragePooling(7, 7, 1, 1))
    :add(nn.View(512):setNumInputDims(3))
    :add(nn.Linear(512, classes or 1000))
  for _, conv in ipairs(model:findModules('nn.SpatialConvolution')) do
    conv.weight:normal(0, math.sqrt(2 / (conv.kW * conv.kH * conv.nOutputPlane)))
  end
  model:findModules('nn.Linear')[1].bias:zero()
  return model
end

-- szagoruyko/cifar.torch's vgg_bn_drop for 32x32 CIFAR images: 13 convolutions with batch norm
-- (eps 1e-3) and dropout, ceil-mode 2x2 max pooling, a 512-512-10 classifier.
function models.vgg(classes)
  local model = nn.Sequential()
  local function conv(from, to, dropout)
    model:add(nn.SpatialConvolution(from, to, 3, 3, 1, 1, 1, 1))
      :add(nn.SpatialBatchNormalization(to, 1e-3))
      :add(nn.ReLU(true))
    if dropout then model:add(nn.Dropout(dropout)) end
  end
  local function pool() model:add(nn.SpatialMaxPooling(2, 2, 2, 2):ceil()) end
  conv(3, 64, 0.3); conv(64, 64); pool()
  conv(64, 128, 0.4); conv(128, 128); pool()
  conv(128, 256, 0.4); conv(256, 256, 0.4); conv(256, 256); pool()
  conv(256, 512, 0.4); conv(512, 512, 0.4); conv(512, 512); pool()
  conv(512, 512, 0.4); conv(512, 512, 0.4); conv(512, 512); pool()
  model:add(nn.View(512))
    :add(nn.Dropout(0.5))
    :add(nn.Linear(512, 512))
    :add(nn.BatchNormalization(512))
    :add(nn.ReLU(true))
    :add(nn.Dropout(0.5))
    :add(nn.Linear(512, classes or 10))
  for _, m in ipairs(model:findModules('nn.SpatialConvolution')) do
    m.weight:normal(0, math.sqrt(2 / (m.kW * m.kH * m.nOutputPlane)))
    m.bias:zero()
  end
  return model
end

-- Caffe's LeNet (examples/mnist/lenet_train_test.prototxt) on 28x28 digits: 20 and 50 5x5
-- convolutions each with 2x2 max pooling, a fully connected layer of 500 with tanh, then 10.
function models.lenet()
  return nn.Sequential()
    :add(nn.SpatialConvolution(1, 20, 5, 5)):add(nn.SpatialMaxPooling(2, 2, 2, 2))
    :add(nn.SpatialConvolution(20, 50, 5, 5)):add(nn.SpatialMaxPooling(2, 2, 2, 2))
    :add(nn.View(800))
    :add(nn.Linear(800, 500)):add(nn.Tanh())
    :add(nn.Linear(500, 10)):add(nn.LogSoftMax())
end

-- The 784-512-512-10 MLP of bench/nn_models.py (its rows build it there; the Lua benches that
-- time passes, bench/two_threads.lua and bench/step_models.lua, build it here).
function models.mlp()
  return nn.Sequential()
    :add(nn.Linear(784, 512)):add(nn.ReLU())
    :add(nn.Linear(512, 512)):add(nn.ReLU())
    :add(nn.Linear(512, 10)):add(nn.LogSoftMax())
end

-- soumith/dcgan.torch's generator netG: noise (nz x 1 x 1) to a 3 x 64 x 64 image through five
-- full convolutions without bias, batch norm and ReLU between them, tanh at the end.
function models.dcgan(nz, ngf)
  nz, ngf = nz or 100, ngf or 64
  local model = nn.Sequential()
  local function up(from, to, first)
    if first then
      model:add(nn.SpatialFullConvolution(from, to, 4, 4):noBias())
    else
      model:add(nn.SpatialFullConvolution(from, to, 4, 4, 2, 2, 1, 1):noBias())
    end
  end
  for i, width in ipairs { ngf * 8, ngf * 4, ngf * 2, ngf } do
    up(i == 1 and nz or 2 * width, width, i == 1)
    model:add(nn.SpatialBatchNormalization(width)):add(nn.ReLU(true))
  end
  up(ngf, 3)
  model:add(nn.Tanh())
  for _, m in ipairs(model:findModules('nn.SpatialFullConvolution')) do m.weight:normal(0, 0.02) end
  for _, m in ipairs(model:findModules('nn.SpatialBatchNormalization')) do
    m.weight:normal(1, 0.02)
    m.bias:zero()
  end
  return model
end

-- One time step of karpathy/char-rnn's model/LSTM.lua: inputs {x, c1, h1, ..., cL, hL} (x the
-- characters' indices), outputs {c1, h1, ..., cL, hL, log-probabilities}. Each layer sums
-- Linear(x) and Linear(h) for the four gates at once, then splits them. The Linear nodes are
-- annotated with char-rnn's names (i2h_L, h2h_L, decoder).
function models.lstm(vocab, hidden, layers)
  local inputs = { nn.Identity()() }
  for _ = 1, layers do
    inputs[#inputs + 1] = nn.Identity()()   -- previous c
    inputs[#inputs + 1] = nn.Identity()()   -- previous h
  end
  local outputs = {}
  local x, width = nn.OneHot(vocab)(inputs[1]), vocab
  for layer = 1, layers do
    local prevC, prevH = inputs[2 * layer], inputs[2 * layer + 1]
    local sums = nn.CAddTable() {
      nn.Linear(width, 4 * hidden)(x):annotate { name = 'i2h_' .. layer },
      nn.Linear(hidden, 4 * hidden)(prevH):annotate { name = 'h2h_' .. layer },
    }
    local gates = nn.SplitTable(2)(nn.Reshape(4, hidden)(sums))
    local inGate, forgetGate, outGate, write = gates:split(4)
    inGate, forgetGate, outGate = nn.Sigmoid()(inGate), nn.Sigmoid()(forgetGate), nn.Sigmoid()(outGate)
    local c = nn.CAddTable() {
      nn.CMulTable() { forgetGate, prevC },
      nn.CMulTable() { inGate, nn.Tanh()(write) },
    }
    local h = nn.CMulTable() { outGate, nn.Tanh()(c) }
    outputs[#outputs + 1] = c
    outputs[#outputs + 1] = h
    x, width = h, hidden
  end
  outputs[#outputs + 1] = nn.LogSoftMax()(nn.Linear(hidden, vocab)(x):annotate { name = 'decoder' })
  return nn.gModule(inputs, outputs)
end

-- The timing loops: each returns a function running `reps` steps.

-- Training steps of a feed-forward model: zero the gradients, forward, criterion, backward,
-- SGD update. Without inputGrad the first module's gradInput is nil, and as in torch7 it then
-- computes none (PyTorch computes no gradient for an input batch that does not require one).
function models.trainer(model, criterion, x, y, lr, inputGrad)
  model:training()
  if not inputGrad then model.modules[1].gradInput = nil end
  local params, grads = model:getParameters()
  return function(reps)
    for _ = 1, reps do
      grads:zero()
      local output = model:forward(x)
      criterion:forward(output, y)
      model:backward(x, criterion:backward(output, y))
      params:add(-lr, grads)
    end
  end
end

-- Forward passes in evaluation mode.
function models.evaluator(model, x)
  model:evaluate()
  return function(reps)
    for _ = 1, reps do model:forward(x) end
  end
end

-- A char-rnn step over a batch of sequences: x and y are steps x batch character indices; one
-- clone of the step model per time step (sharing its parameters), a ClassNLLCriterion per step.
-- train: forward through time, backward through time, SGD update; else forward only, in
-- evaluation mode. The state starts at zero each call.
function models.lstmLoop(proto, layers, hidden, x, y, lr, train)
  local steps, batch = x:size(1), x:size(2)
  local params, grads = proto:getParameters()
  local clones, criteria = {}, {}
  for t = 1, steps do
    clones[t] = proto:clone('weight', 'bias', 'gradWeight', 'gradBias')
    criteria[t] = nn.ClassNLLCriterion():float()
    if train then clones[t]:training() else clones[t]:evaluate() end
  end
  local zero = torch.FloatTensor(batch, hidden):zero()
  local initial, finalGrads = {}, {}
  for i = 1, 2 * layers do initial[i], finalGrads[i] = zero, zero end
  local inputs = {}
  local function forward()
    local state = initial
    for t = 1, steps do
      inputs[t] = { x[t], unpack(state) }
      local out = clones[t]:forward(inputs[t])
      state = { unpack(out, 1, 2 * layers) }
      if train then criteria[t]:forward(out[#out], y[t]) end
    end
  end
  local function backward()
    local gradState = finalGrads
    for t = steps, 1, -1 do
      local out = clones[t].output
      local gradOut = { unpack(gradState) }
      gradOut[#gradOut + 1] = criteria[t]:backward(out[#out], y[t])
      local gradIn = clones[t]:backward(inputs[t], gradOut)
      gradState = { unpack(gradIn, 2, 2 * layers + 1) }
    end
  end
  return function(reps)
    for _ = 1, reps do
      if train then
        grads:zero()
        forward()
        backward()
        params:add(-lr, grads)
      else
        forward()
      end
    end
  end
end

return models
