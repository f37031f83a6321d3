-- cudnn.RNN: cuDNN's fused recurrent layers (numLayers layers, one or two directions) with
-- cuDNN's flat weight: for each layer and direction in turn (layer 1 forward, layer 1
-- backward, layer 2 ...), the input matrices of its gates (H x inputs each, row-major), the
-- recurrent ones (H x H), the input biases, the recurrent biases. The input is seqLength x
-- batch x inputSize (batch x seqLength x inputSize with batchFirst) or a packed sequence
-- {rows x inputSize, batch sizes per step} (see packPaddedSequence); the output holds both
-- directions' hidden states side by side. hiddenInput / cellInput (numLayers * directions x
-- batch x H) start the sequence, hiddenOutput / cellOutput end it; gradHiddenOutput /
-- gradCellOutput and gradHiddenInput / gradCellInput are their gradients. The computation is
-- cudnn/util/rnn.lua's. LSTM, GRU, RNNTanh, RNNReLU, BLSTM and BGRU set the mode and directions.
local check = require 'torch.core.check'
local rnn = require 'cudnn.util.rnn'

local RNN, parent = torch.class('cudnn.RNN', 'nn.Module')

-- matrices (and biases) per layer and direction, by mode, as cudnn.torch exposes them
RNN.linearLayers = { CUDNN_LSTM = 8, CUDNN_GRU = 6, CUDNN_RNN_RELU = 2, CUDNN_RNN_TANH = 2 }

local directions = { CUDNN_UNIDIRECTIONAL = 1, CUDNN_BIDIRECTIONAL = 2 }

local function fail(self, fmt, ...)
  check.error(torch.type(self) .. ': ' .. fmt:format(...))
end

function RNN:__init(inputSize, hiddenSize, numLayers, batchFirst, dropout, rememberStates)
  parent.__init(self)
  local op = torch.type(self)
  self.inputSize = check.int(op, inputSize, 'inputSize', 1)
  self.hiddenSize = check.int(op, hiddenSize, 'hiddenSize', 1)
  self.numLayers = check.int(op, numLayers, 'numLayers', 1)
  self.datatype = 'CUDNN_DATA_FLOAT'
  self.seqLength, self.miniBatch = 1, 1
  self.bidirectional, self.numDirections = 'CUDNN_UNIDIRECTIONAL', 1
  self.inputMode = 'CUDNN_LINEAR_INPUT'
  self.mode = 'CUDNN_RNN_RELU'
  self.dropout = dropout or 0
  self.seed = 0x01234567
  self.batchFirst = batchFirst or false
  self.rememberStates = rememberStates or false
  self.sync = true
  self.inputPacked = false
  for _, k in ipairs { 'gradInput', 'output', 'weight', 'gradWeight', 'hiddenOutput', 'cellOutput',
                       'gradHiddenInput', 'gradCellInput' } do
    self[k] = torch.CudaTensor()
  end
  self:training()
  self:reset()
end

function RNN:setSync(sync) self.sync = sync end

-- The inputs of layer l (1-based).
function RNN:_layerInputs(l)
  return l == 1 and self.inputSize or self.hiddenSize * self.numDirections
end

-- Checks the settings; returns the gate count.
function RNN:_checkSettings()
  local gates = rnn.gates[self.mode]
  if not gates then
    fail(self, 'unknown mode %s (CUDNN_LSTM, CUDNN_GRU, CUDNN_RNN_TANH or CUDNN_RNN_RELU)', tostring(self.mode))
  end
  if directions[self.bidirectional] ~= self.numDirections then
    fail(self, 'bidirectional is %s but numDirections is %s', tostring(self.bidirectional),
      tostring(self.numDirections))
  end
  if self.inputMode ~= 'CUDNN_LINEAR_INPUT' then
    fail(self, 'inputMode %s is not supported (only CUDNN_LINEAR_INPUT)', tostring(self.inputMode))
  end
  if type(self.dropout) ~= 'number' or self.dropout < 0 or self.dropout >= 1 then
    fail(self, 'dropout must be in [0, 1), got %s', tostring(self.dropout))
  end
  return gates
end

-- The flat weight's element count, as cudnnGetRNNParamsSize.
function RNN:_weightSize()
  local G, H = self:_checkSettings(), self.hiddenSize
  local n = 0
  for l = 1, self.numLayers do
    n = n + self.numDirections * G * H * (self:_layerInputs(l) + H + 2)
  end
  return n
end

function RNN:reset(stdv)
  stdv = stdv or 1 / math.sqrt(self.hiddenSize)
  self.weight:resize(self:_weightSize()):uniform(-stdv, stdv)
  self.gradWeight:resizeAs(self.weight):zero()
end

-- The parameter blocks of each layer and direction: W, R, bW, bR as views of t.
local function blocks(self, t)
  local G, H = rnn.gates[self.mode], self.hiddenSize
  local out, off = {}, 1
  local function take(...)
    local sizes = { ... }
    local n = 1
    for _, s in ipairs(sizes) do n = n * s end
    local v = t:narrow(1, off, n):view(torch.LongStorage(sizes))
    off = off + n
    return v
  end
  for l = 1, self.numLayers do
    for _ = 1, self.numDirections do
      local b = {}
      b.W = take(G * H, self:_layerInputs(l))
      b.R = take(G * H, H)
      b.bW, b.bR = take(G * H), take(G * H)
      out[#out + 1] = b
    end
  end
  return out
end

-- Per module (off it: neither saved nor cloned): the layers (parameter views and buffers) for
-- its weight, and what the last forward and backward passes kept.
local cache = setmetatable({}, { __mode = 'k' })

local function layers(self)
  local e = cache[self]
  local w, gw = self.weight, self.gradWeight
  local key = table.concat({ self.mode, self.inputSize, self.hiddenSize, self.numLayers, self.numDirections,
    torch.isTensor(w) and w:nElement() or -1, torch.type(w) }, ' ')
  if e and e.weight == w and e.gradWeight == gw and e.key == key then return e end
  local n = self:_weightSize()
  if not torch.isTensor(w) or w:dim() ~= 1 or w:nElement() ~= n then
    fail(self, 'weight must be a vector of %d elements (mode %s, inputSize %d, hiddenSize %d, ' ..
      '%d layers, %d directions), got %s', n, self.mode, self.inputSize, self.hiddenSize,
      self.numLayers, self.numDirections, torch.isTensor(w) and check.sizestr(w) or torch.type(w))
  end
  if not torch.isTensor(gw) or not gw:isSameSizeAs(w) or gw:type() ~= w:type() then
    self.gradWeight = w.new():resizeAs(w):zero()
    gw = self.gradWeight
  end
  if not w:isContiguous() or not gw:isContiguous() then fail(self, 'weight and gradWeight must be contiguous') end
  e = { weight = w, gradWeight = gw, key = key, L = {} }
  local grads = blocks(self, gw)
  for i, b in ipairs(blocks(self, w)) do
    b.mode, b.H = self.mode, self.hiddenSize
    b.dW, b.dR, b.dbW, b.dbR = grads[i].W, grads[i].R, grads[i].bW, grads[i].bR
    for _, k in ipairs { 'h', 'c', 'A', 'HP', 'CP', 'C', 'AH', 'dh', 'dc', 'dA', 'dAH', 'dhp',
                         'dhStep', 'tmp', 'buf', 'sum' } do
      b[k] = w.new()
    end
    e.L[i] = b
  end
  cache[self] = e
  return e
end

-- A contiguous copy of t in self[name] when t is not contiguous.
local function contiguous(self, name, t)
  if t:isContiguous() then return t end
  self[name] = self[name] or t.new()
  return self[name]:typeAs(t):resizeAs(t):copy(t)
end

-- The steps of an input: each one's first row (0-based) and row count, and the batch size.
local function stepsOf(self, input)
  local steps = {}
  if self.inputPacked then
    local data, sizes = input[1], input[2]
    if not torch.isTensor(data) or data:dim() ~= 2 or type(sizes) ~= 'table' or #sizes == 0 then
      fail(self, 'a packed input is {rows x inputSize tensor, batch sizes per step}, got {%s, %s}',
        torch.isTensor(data) and check.sizestr(data) or torch.type(data), torch.type(sizes))
    end
    local off = 0
    for t, n in ipairs(sizes) do
      if not check.isInt(n) or n < 1 or (t > 1 and n > sizes[t - 1]) then
        fail(self, 'the batch sizes of a packed input must be positive and not increasing, got %s at step %d',
          tostring(n), t)
      end
      steps[t] = { off = off, n = n }
      off = off + n
    end
    if off ~= data:size(1) then
      fail(self, 'the batch sizes of a packed input add up to %d but it has %d rows', off, data:size(1))
    end
    return steps, sizes[1], contiguous(self, '_input', data)
  end
  if not torch.isTensor(input) or input:dim() ~= 3 then
    fail(self, 'input must have 3 dimensions: seqLength, miniBatch, inputSize (got %s)',
      torch.isTensor(input) and check.sizestr(input) or torch.type(input))
  end
  local T, B = input:size(1), input:size(2)
  for t = 1, T do steps[t] = { off = (t - 1) * B, n = B } end
  return steps, B, contiguous(self, '_input', input):view(T * B, input:size(3))
end

local function reversed(steps)
  local r = {}
  for i = #steps, 1, -1 do r[#r + 1] = steps[i] end
  return r
end

-- A state tensor given by the user (nil, or numLayers * directions x batch x hiddenSize).
function RNN:_state(name, B)
  local t = self[name]
  if t == nil then return nil end
  local n = self.numLayers * self.numDirections
  if not torch.isTensor(t) or t:dim() ~= 3 or t:size(1) ~= n or t:size(2) ~= B or t:size(3) ~= self.hiddenSize then
    fail(self, '%s must be %d x %d x %d (numLayers * directions, miniBatch, hiddenSize), got %s', name,
      n, B, self.hiddenSize, torch.isTensor(t) and check.sizestr(t) or torch.type(t))
  end
  if t:type() ~= self.weight:type() then
    fail(self, '%s is a %s but the weight is a %s', name, t:type(), self.weight:type())
  end
  return t
end

-- t (batch x H): entry i of the given states, or zeros.
local function startState(t, given, i, B, H)
  t:resize(B, H):zero()
  if given then t:copy(given[i]) end
end

function RNN:updateOutput(input)
  local e = layers(self)
  self.inputPacked = type(input) == 'table'
  if not self.inputPacked and self.batchFirst and torch.isTensor(input) and input:dim() == 3 then
    input = input:transpose(1, 2)
  end
  local steps, B, X = stepsOf(self, input)
  if X:size(2) ~= self.inputSize then
    fail(self, 'input has %d features per step, expected inputSize %d', X:size(2), self.inputSize)
  end
  if X:type() ~= self.weight:type() then
    fail(self, 'input is a %s but the weight is a %s (convert the module with :type())', X:type(), self.weight:type())
  end
  self.seqLength, self.miniBatch = #steps, B
  local D, H, n = self.numDirections, self.hiddenSize, self.numLayers * self.numDirections
  if self.rememberStates then
    local ho, co = self.hiddenOutput, self.cellOutput
    local kept = ho:dim() == 3 and ho:size(1) == n and ho:size(2) == B and ho:size(3) == H
    self.hiddenInput = kept and ho:clone() or nil
    self.cellInput = kept and co:isSameSizeAs(ho) and co:clone() or nil
  end
  local hx, cx = self:_state('hiddenInput', B), self:_state('cellInput', B)
  local hy = self.hiddenOutput:resize(n, B, H)
  local cy = self.cellOutput:resize(n, B, H):zero()
  local orders = { steps, reversed(steps) }
  e.X, e.masks, e.Y, e.dropped = { X }, {}, e.Y or {}, e.dropped or {}
  self._y = self._y or X.new()
  for l = 1, self.numLayers do
    local Y = l == self.numLayers and self._y or (e.Y[l] or X.new())
    e.Y[l] = Y
    Y:resize(X:size(1), D * H)
    for d = 1, D do
      local i = (l - 1) * D + d
      local L = e.L[i]
      startState(L.h, hx, i, B, H)
      if self.mode == 'CUDNN_LSTM' then startState(L.c, cx, i, B, H) end
      rnn.forward(L, e.X[l], Y, orders[d], (d - 1) * H + 1)
      hy[i]:copy(L.h)
      if self.mode == 'CUDNN_LSTM' then cy[i]:copy(L.c) end
    end
    if l < self.numLayers then   -- the next layer's input, with dropout when training
      local nextX = Y
      if self.train ~= false and self.dropout > 0 then
        local keep = 1 - self.dropout
        e.masks[l] = Y.new():resizeAs(Y):bernoulli(keep):div(keep)
        e.dropped[l] = e.dropped[l] or Y.new()
        nextX = e.dropped[l]:resizeAs(Y):cmul(Y, e.masks[l])
      end
      e.X[l + 1] = nextX
    end
  end
  e.steps, e.orders, e.B, e.backward = steps, orders, B, false
  if self.inputPacked then
    self.output = self._y
  else
    self.output = self._y:view(#steps, B, D * H)
    if self.batchFirst then self.output = self.output:transpose(1, 2) end
  end
  return self.output
end

function RNN:updateGradInput(input, gradOutput)
  local e = layers(self)
  if not e.steps then fail(self, 'call updateOutput before updateGradInput') end
  if not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(self.output) then
    fail(self, 'gradOutput has size %s, expected the output size %s',
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(self.output))
  end
  if self.batchFirst and not self.inputPacked then gradOutput = gradOutput:transpose(1, 2) end
  local D, H, B = self.numDirections, self.hiddenSize, e.B
  local n = self.numLayers * D
  local dhy, dcy = self:_state('gradHiddenOutput', B), self:_state('gradCellOutput', B)
  local dhx = self.gradHiddenInput:resize(n, B, H)
  local dcx = self.gradCellInput:resize(n, B, H):zero()
  local dY = contiguous(self, '_gradOutput', gradOutput):view(e.X[1]:size(1), D * H)
  e.dX = e.dX or {}
  for l = self.numLayers, 1, -1 do
    local dX = (e.dX[l] or dY.new()):resizeAs(e.X[l]):zero()
    e.dX[l] = dX
    for d = 1, D do
      local i = (l - 1) * D + d
      local L = e.L[i]
      startState(L.dh, dhy, i, B, H)
      if self.mode == 'CUDNN_LSTM' then startState(L.dc, dcy, i, B, H) end
      rnn.backward(L, dX, dY, e.orders[d], (d - 1) * H + 1)
      dhx[i]:copy(L.dh)
      if self.mode == 'CUDNN_LSTM' then dcx[i]:copy(L.dc) end
    end
    if l > 1 and e.masks[l - 1] then dX:cmul(e.masks[l - 1]) end
    dY = dX
  end
  e.backward = true
  self.gradInput = self.gradInput:typeAs(dY):resizeAs(dY):copy(dY)
  if not self.inputPacked then
    self.gradInput = self.gradInput:view(#e.steps, B, self.inputSize)
    if self.batchFirst then self.gradInput = self.gradInput:transpose(1, 2) end
  end
  return self.gradInput
end

-- From the gradients of the last updateGradInput (run here when it has not run since the
-- last updateOutput).
function RNN:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local e = layers(self)
  if not e.backward then self:updateGradInput(input, gradOutput) end
  local D = self.numDirections
  for i, L in ipairs(e.L) do rnn.accGrad(L, e.X[math.floor((i - 1) / D) + 1], scale) end
end

-- Views of the input and recurrent matrices (weights) or their biases of each layer and
-- direction, in cuDNN's order of linear layers, as vectors.
local function linearParams(self, which)
  local out = {}
  for _, b in ipairs(blocks(self, self.weight)) do
    local H = self.hiddenSize
    local parts = which == 'weights' and { b.W, b.R } or { b.bW, b.bR }
    local list = {}
    for _, p in ipairs(parts) do
      for g = 1, p:size(1) / H do
        local v = p:narrow(1, (g - 1) * H + 1, H)
        list[#list + 1] = v:view(v:nElement())
      end
    end
    out[#out + 1] = list
  end
  return out
end

function RNN:weights() return linearParams(self, 'weights') end
function RNN:biases() return linearParams(self, 'biases') end

function RNN:resetStates()
  self.hiddenInput, self.cellInput = nil, nil
  self.hiddenOutput:zero()
  self.cellOutput:zero()
  self.gradHiddenOutput, self.gradCellOutput = nil, nil
end

-- seqLength x batch x ... (batch x seqLength x ... with batchFirst) and the sequences'
-- lengths (not increasing) -> {rows x ..., batch sizes per step}: at each step, the rows of
-- the sequences still running.
function RNN:packPaddedSequence(input, lengths, batchFirst)
  if batchFirst then input = input:transpose(1, 2) end
  local B = input:size(2)
  if #lengths ~= B then
    fail(self, 'packPaddedSequence: %d lengths for a batch of %d', #lengths, B)
  end
  local parts, sizes = {}, {}
  for t = 1, input:size(1) do
    local n = 0
    for i, len in ipairs(lengths) do
      if i > 1 and len > lengths[i - 1] then
        fail(self, 'packPaddedSequence: the lengths must not increase, got %d after %d', len, lengths[i - 1])
      end
      if len >= t then n = n + 1 end
    end
    if n == 0 then break end
    parts[t], sizes[t] = input[t]:narrow(1, 1, n), n
  end
  return { torch.cat(parts, 1), sizes }
end

-- The inverse of packPaddedSequence: the padded tensor (zeros past each sequence's end) and
-- the lengths.
function RNN:padPackedSequence(seq, batchFirst)
  local data, sizes = seq[1], seq[2]
  local dims = { #sizes, sizes[1] }
  for d = 2, data:dim() do dims[d + 1] = data:size(d) end
  local output = data.new():resize(torch.LongStorage(dims)):zero()
  local lengths, off = {}, 0
  for t, n in ipairs(sizes) do
    output[t]:narrow(1, 1, n):copy(data:narrow(1, off + 1, n))
    off = off + n
    for i = 1, n do lengths[i] = t end
  end
  if batchFirst then output = output:transpose(1, 2) end
  return output, lengths
end

-- cuDNN's descriptors: none here.
function RNN:clearDesc() end
function RNN:resetWeightDescriptor() end

function RNN:clearState()
  cache[self] = nil
  nn.utils.clear(self, '_input', '_gradOutput', '_y', 'reserve', 'dropoutStates')
  return parent.clearState(self)
end

-- Files from older cudnn.torch lack the newer fields; cuDNN's reserve and dropout states
-- mean nothing here.
function RNN:read(file, version)
  parent.read(self, file, version)
  for k, v in pairs { batchFirst = false, rememberStates = false, inputPacked = false, sync = true,
                      dropout = 0, numDirections = directions[self.bidirectional] or 1 } do
    if self[k] == nil then self[k] = v end
  end
  self.reserve, self.dropoutStates = nil, nil
end

function RNN:__tostring__()
  return ('%s(%d -> %d, %d layer%s%s%s)'):format(torch.type(self), self.inputSize, self.hiddenSize,
    self.numLayers, self.numLayers == 1 and '' or 's', self.numDirections == 2 and ', bidirectional' or '',
    self.dropout > 0 and (', dropout %g'):format(self.dropout) or '')
end

return RNN
