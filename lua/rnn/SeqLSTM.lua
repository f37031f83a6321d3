-- nn.SeqLSTM(inputSize, hiddenSize[, outputSize]): an LSTM over a whole seqlen x batch x
-- inputSize tensor (batch x seqlen with batchfirst), computed step by step with BLAS and its own
-- backward (after torch-rnn). Input x, {h0, x} or {c0, h0, x}; output seqlen x batch x outputSize.
--   a = b + x Wx + h Wh,  i, f, o = s(a_i, a_f, a_o),  g = tanh(a_g)   (gate order i f o g)
--   c' = f.c + i.g,  h' = o.tanh(c')
-- weight is (inputSize + outputSize) x 4*hiddenSize. maskZero() zeroes the steps whose input
-- row is all zeros. remember() as the Sequencers; userPrevOutput/userPrevCell set h0/c0 once.
local seqState = require 'rnn.seqState'
local SeqLSTM, parent = torch.class('nn.SeqLSTM', 'nn.Module')

function SeqLSTM:__init(inputSize, hiddenSize, outputSize)
  parent.__init(self)
  outputSize = outputSize or hiddenSize
  local D, H, R = inputSize, hiddenSize, outputSize
  self.inputsize, self.hiddensize, self.outputsize = D, H, R
  self.weight = torch.Tensor(D + R, 4 * H)
  self.gradWeight = torch.Tensor(D + R, 4 * H):zero()
  self.bias = torch.Tensor(4 * H)
  self.gradBias = torch.Tensor(4 * H):zero()
  self:reset()
  self.cell = torch.Tensor() -- T x N x H
  self.gates = torch.Tensor() -- T x N x 4H
  self.hidden = torch.Tensor() -- T x N x H, before the projection (SeqLSTMP)
  self.grad_a_buffer = torch.Tensor()
  self.buffer1 = torch.Tensor()
  self.buffer2 = torch.Tensor()
  self.buffer3 = torch.Tensor()
  self.h0 = torch.Tensor()
  self.c0 = torch.Tensor()
  self.grad_c0 = torch.Tensor()
  self.grad_h0 = torch.Tensor()
  self.grad_x = torch.Tensor()
  self.gradInput = { self.grad_c0, self.grad_h0, self.grad_x }
  self._remember = 'neither'
  self.batchfirst = false
  self.maskzero = false
end

-- Normal weights, zero biases except the forget gate's (1).
function SeqLSTM:reset(std)
  std = std or 1.0 / math.sqrt(self.outputsize + self.inputsize)
  self.bias:zero()
  self.bias:narrow(1, self.hiddensize + 1, self.hiddensize):fill(1)
  self.weight:normal(0, std)
  return self
end

function SeqLSTM:resetStates()
  self.h0 = self.h0.new()
  self.c0 = self.c0.new()
end

-- The hidden output h of one step from the gated hidden state (identity here; SeqLSTMP projects).
function SeqLSTM:project(hidden, output) output:copy(hidden) end
-- Back through project: returns the gradient w.r.t. the hidden state (and accumulates weightO's).
function SeqLSTM:projectBackward(t, gradOutput, scale) return gradOutput end

function SeqLSTM:updateOutput(input)
  self.recompute_backward = true
  local D, H, R = self.inputsize, self.hiddensize, self.outputsize
  local c0, h0, x = seqState.prepare(self, input, nil, true, H, R, D)
  local T, N = x:size(1), x:size(2)
  self._output = self._output or self.weight.new()
  self._return_grad_c0, self._return_grad_h0 = c0 ~= nil, h0 ~= nil
  c0 = c0 or seqState.initial(self, self.c0, self.userPrevCell, self.cell, N, H, 'userPrevCell')
  h0 = h0 or seqState.initial(self, self.h0, self.userPrevOutput, self._output, N, R, 'userPrevOutput')
  self._c0, self._h0 = c0, h0
  local Wx, Wh = self.weight:narrow(1, 1, D), self.weight:narrow(1, D + 1, R)
  local bias = self.bias:view(1, 4 * H):expand(N, 4 * H)
  local h, c, hidden, gates = self._output, self.cell, self.hidden, self.gates
  h:resize(T, N, R)
  c:resize(T, N, H)
  hidden:resize(T, N, H)
  gates:resize(T, N, 4 * H)
  local prevH, prevC = h0, c0
  for t = 1, T do
    local a = gates[t]
    a:addmm(bias, x[t], Wx):addmm(prevH, Wh)
    a:narrow(2, 1, 3 * H):sigmoid()
    a:narrow(2, 3 * H + 1, H):tanh()
    local i, f, o, g = a:narrow(2, 1, H), a:narrow(2, H + 1, H), a:narrow(2, 2 * H + 1, H), a:narrow(2, 3 * H + 1, H)
    c[t]:cmul(f, prevC):addcmul(i, g)
    hidden[t]:tanh(c[t]):cmul(o)
    self:project(hidden[t], h[t])
    if self.maskzero then
      seqState.maskRows({ h[t], c[t], hidden[t], a }, seqState.zeroRows(self, x[t]):view(N, 1))
    end
    prevH, prevC = h[t], c[t]
  end
  self.userPrevOutput, self.userPrevCell = nil, nil
  self.output = self.batchfirst and h:transpose(1, 2) or h
  return self.output
end

function SeqLSTM:backward(input, gradOutput, scale)
  self.recompute_backward = false
  scale = scale or 1.0
  assert(scale == 1.0, 'SeqLSTM: backward must have scale=1')
  local D, H, R = self.inputsize, self.hiddensize, self.outputsize
  local _, _, x, gradH = seqState.prepare(self, input, gradOutput, true, H, R, D)
  if not gradH then error("SeqLSTM: expecting gradOutput") end
  local T, N = x:size(1), x:size(2)
  local c0, h0 = self._c0, self._h0
  local h, c, gates = self._output, self.cell, self.gates
  local Wx, Wh = self.weight:narrow(1, 1, D), self.weight:narrow(1, D + 1, R)
  local gWx, gWh = self.gradWeight:narrow(1, 1, D), self.gradWeight:narrow(1, D + 1, R)
  self._grad_x = self._grad_x or self.weight.new()
  local gradX = self._grad_x:resizeAs(x)
  -- gradients flowing into the state after the last step
  local gradNextH = self.buffer1:resize(N, R)
  if self.gradPrevOutput then gradNextH:copy(self.gradPrevOutput) else gradNextH:zero() end
  local gradNextC = self.buffer2:resize(N, H)
  if self.userNextGradCell then gradNextC:copy(self.userNextGradCell) else gradNextC:zero() end
  local tanhC = self.buffer3
  for t = T, 1, -1 do
    local prevH, prevC = t == 1 and h0 or h[t - 1], t == 1 and c0 or c[t - 1]
    gradNextH:add(gradH[t])
    if self.maskzero then seqState.maskRows({ gradNextH }, seqState.zeroRows(self, x[t]):view(N, 1)) end
    local gradHidden = self:projectBackward(t, gradNextH, scale)
    local a = gates[t]
    local i, f, o, g = a:narrow(2, 1, H), a:narrow(2, H + 1, H), a:narrow(2, 2 * H + 1, H), a:narrow(2, 3 * H + 1, H)
    local da = self.grad_a_buffer:resize(N, 4 * H)
    local di, df, do_, dg = da:narrow(2, 1, H), da:narrow(2, H + 1, H), da:narrow(2, 2 * H + 1, H), da:narrow(2, 3 * H + 1, H)
    tanhC:resize(N, H):tanh(c[t])
    -- dc += dh . o . (1 - tanh(c)^2)
    dg:cmul(tanhC, tanhC):mul(-1):add(1):cmul(o):cmul(gradHidden)
    gradNextC:add(dg)
    do_:fill(1):add(-1, o):cmul(o):cmul(tanhC):cmul(gradHidden)
    dg:cmul(g, g):mul(-1):add(1):cmul(i):cmul(gradNextC)
    di:fill(1):add(-1, i):cmul(i):cmul(g):cmul(gradNextC)
    df:fill(1):add(-1, f):cmul(f):cmul(prevC):cmul(gradNextC)
    gradX[t]:mm(da, Wx:t())
    gWx:addmm(scale, x[t]:t(), da)
    gWh:addmm(scale, prevH:t(), da)
    self.gradBias:add(scale, da:sum(1):view(4 * H))
    gradNextH:mm(da, Wh:t())
    gradNextC:cmul(f)
  end
  self.grad_h0:resizeAs(gradNextH):copy(gradNextH)
  self.grad_c0:resizeAs(gradNextC):copy(gradNextC)
  self.grad_x = self.batchfirst and gradX:transpose(1, 2) or gradX
  self.gradPrevOutput, self.userNextGradCell = nil, nil
  self.userGradPrevCell, self.userGradPrevOutput = self.grad_c0, self.grad_h0
  if self._return_grad_c0 and self._return_grad_h0 then
    self.gradInput = { self.grad_c0, self.grad_h0, self.grad_x }
  elseif self._return_grad_h0 then
    self.gradInput = { self.grad_h0, self.grad_x }
  else
    self.gradInput = self.grad_x
  end
  return self.gradInput
end

-- updateGradInput and accGradParameters share one backward pass per forward.
function SeqLSTM:updateGradInput(input, gradOutput)
  if self.recompute_backward then self:backward(input, gradOutput, 1.0) end
  return self.gradInput
end

function SeqLSTM:accGradParameters(input, gradOutput, scale)
  if self.recompute_backward then self:backward(input, gradOutput, scale) end
end

function SeqLSTM:clearState()
  for _, name in ipairs({ 'cell', 'gates', 'hidden', 'buffer1', 'buffer2', 'buffer3', 'grad_a_buffer', 'grad_c0', 'grad_h0' }) do
    self[name]:set()
  end
  self.grad_x = torch.isTensor(self.grad_x) and self.grad_x:set() or self.grad_x
  self._grad_x, self._output, self._c0, self._h0 = nil, nil, nil, nil
  self.output:set()
  self.gradInput = nil
  self.zeroMask, self._zeroMask = nil, nil
end

function SeqLSTM:forget()
  self.c0:resize(0)
  self.h0:resize(0)
end

function SeqLSTM:type(type, ...)
  self.zeroMask, self._zeroMask, self._c0, self._h0 = nil, nil, nil, nil
  return parent.type(self, type, ...)
end

SeqLSTM.remember = seqState.remember

function SeqLSTM:training()
  if self.train == false then self:forget() end
  parent.training(self)
end

function SeqLSTM:evaluate()
  if self.train ~= false then self:forget() end
  parent.evaluate(self)
end

function SeqLSTM:maskZero() self.maskzero = true end

-- An nn.FastLSTM with the same parameters (FastLSTM's gate order is i g f o, weights transposed).
function SeqLSTM:toFastLSTM()
  local D, H = self.inputsize, self.outputsize
  local lstm = nn.FastLSTM(D, H)
  local params, gradParams = lstm:parameters()
  local fastOrder = { 1, 4, 2, 3 } -- FastLSTM block k holds SeqLSTM gate fastOrder[k]
  for _, pair in ipairs({ { self.weight, self.bias, params }, { self.gradWeight, self.gradBias, gradParams } }) do
    local weight, bias, dest = pair[1], pair[2], pair[3]
    for k, gate in ipairs(fastOrder) do
      local cols = { (gate - 1) * H + 1, gate * H }
      local rows = { (k - 1) * H + 1, k * H }
      dest[1][{ rows }]:t():copy(weight[{ { 1, D }, cols }])
      dest[2][{ rows }]:copy(bias[{ cols }])
      dest[3][{ rows }]:t():copy(weight[{ { D + 1, D + H }, cols }])
    end
  end
  return lstm
end
