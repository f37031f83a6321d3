-- nn.SeqGRU(inputSize, outputSize): a GRU over a whole seqlen x batch x inputSize tensor
-- (batch x seqlen with batchfirst) with its own backward. Input x or {h0, x}.
--   r = s(x Wxr + h Whr + br),  u = s(x Wxu + h Whu + bu),  n = tanh(x Wxn + (r.h) Whn + bn)
--   h' = (1-u).n + u.h
-- weight is (inputSize + outputSize) x 3*outputSize (blocks r u n). maskZero, remember and
-- userPrevOutput as SeqLSTM.
local seqState = require 'rnn.seqState'
local SeqGRU, parent = torch.class('nn.SeqGRU', 'nn.Module')

function SeqGRU:__init(inputSize, outputSize)
  parent.__init(self)
  self.inputSize = inputSize
  self.outputSize = outputSize
  local D, H = inputSize, outputSize
  self.weight = torch.Tensor(D + H, 3 * H)
  self.gradWeight = torch.Tensor(D + H, 3 * H):zero()
  self.bias = torch.Tensor(3 * H)
  self.gradBias = torch.Tensor(3 * H):zero()
  self:reset()
  self.gates = torch.Tensor() -- T x N x 3H: r, u, n
  self.buffer1 = torch.Tensor()
  self.buffer2 = torch.Tensor()
  self.grad_a_buffer = torch.Tensor()
  self.h0 = torch.Tensor()
  self.grad_h0 = torch.Tensor()
  self.grad_x = torch.Tensor()
  self.gradInput = { self.grad_h0, self.grad_x }
  self._remember = 'neither'
  self.batchfirst = false
  self.maskzero = false
end

function SeqGRU:reset(std)
  std = std or 1.0 / math.sqrt(self.outputSize + self.inputSize)
  self.bias:zero()
  self.bias:narrow(1, self.outputSize + 1, self.outputSize):fill(1)
  self.weight:normal(0, std)
  return self
end

function SeqGRU:resetStates() self.h0 = self.h0.new() end

function SeqGRU:updateOutput(input)
  self.recompute_backward = true
  local D, H = self.inputSize, self.outputSize
  local _, h0, x = seqState.prepare(self, input, nil, false, H, H, D)
  local T, N = x:size(1), x:size(2)
  self._output = self._output or self.weight.new()
  self._return_grad_h0 = h0 ~= nil
  h0 = h0 or seqState.initial(self, self.h0, self.userPrevOutput, self._output, N, H, 'userPrevOutput')
  self._h0 = h0
  local Wx, Wh = self.weight:narrow(1, 1, D), self.weight:narrow(1, D + 1, H)
  local bias = self.bias:view(1, 3 * H):expand(N, 3 * H)
  local h, gates = self._output, self.gates
  h:resize(T, N, H)
  gates:resize(T, N, 3 * H)
  local prevH = h0
  for t = 1, T do
    local a = gates[t]
    a:addmm(bias, x[t], Wx)
    local ru = a:narrow(2, 1, 2 * H)
    ru:addmm(prevH, Wh:narrow(2, 1, 2 * H)):sigmoid()
    local r, u, n = a:narrow(2, 1, H), a:narrow(2, H + 1, H), a:narrow(2, 2 * H + 1, H)
    local nextH = h[t]
    nextH:cmul(r, prevH) -- r.h, a temporary
    n:addmm(nextH, Wh:narrow(2, 2 * H + 1, H)):tanh()
    nextH:copy(n):addcmul(-1, u, n):addcmul(u, prevH)
    if self.maskzero then seqState.maskRows({ nextH, a }, seqState.zeroRows(self, x[t]):view(N, 1)) end
    prevH = nextH
  end
  self.userPrevOutput = nil
  self.output = self.batchfirst and h:transpose(1, 2) or h
  return self.output
end

function SeqGRU:backward(input, gradOutput, scale)
  self.recompute_backward = false
  scale = scale or 1.0
  assert(scale == 1.0, 'SeqGRU: backward must have scale=1')
  local D, H = self.inputSize, self.outputSize
  local _, _, x, gradH = seqState.prepare(self, input, gradOutput, false, H, H, D)
  if not gradH then error("SeqGRU: expecting gradOutput") end
  local T, N = x:size(1), x:size(2)
  local h0, h, gates = self._h0, self._output, self.gates
  local Wx, Wh = self.weight:narrow(1, 1, D), self.weight:narrow(1, D + 1, H)
  local gWx, gWh = self.gradWeight:narrow(1, 1, D), self.gradWeight:narrow(1, D + 1, H)
  local WhRU, WhN = Wh:narrow(2, 1, 2 * H), Wh:narrow(2, 2 * H + 1, H)
  self._grad_x = self._grad_x or self.weight.new()
  local gradX = self._grad_x:resizeAs(x)
  local gradNextH = self.buffer1:resize(N, H)
  if self.gradPrevOutput then gradNextH:copy(self.gradPrevOutput) else gradNextH:zero() end
  local rh = self.buffer2
  for t = T, 1, -1 do
    local prevH = t == 1 and h0 or h[t - 1]
    gradNextH:add(gradH[t])
    if self.maskzero then seqState.maskRows({ gradNextH }, seqState.zeroRows(self, x[t]):view(N, 1)) end
    local a = gates[t]
    local r, u, n = a:narrow(2, 1, H), a:narrow(2, H + 1, H), a:narrow(2, 2 * H + 1, H)
    local da = self.grad_a_buffer:resize(N, 3 * H)
    local dr, du, dn = da:narrow(2, 1, H), da:narrow(2, H + 1, H), da:narrow(2, 2 * H + 1, H)
    -- dn = dh . (1-u) . (1 - n^2)
    dn:cmul(n, n):mul(-1):add(1):cmul(gradNextH):addcmul(-1, u, dn)
    -- d(r.h) = dn Whn^T;  dr = d(r.h) . h . r(1-r)
    dr:mm(dn, WhN:t()):cmul(prevH)
    dr:cmul(r):addcmul(-1, r, dr)
    -- du = dh . (h - n) . u(1-u)
    du:add(prevH, -1, n):cmul(gradNextH):cmul(u)
    du:addcmul(-1, u, du)
    rh:resize(N, H):cmul(r, prevH)
    gradX[t]:mm(da, Wx:t())
    gWx:addmm(scale, x[t]:t(), da)
    gWh:narrow(2, 1, 2 * H):addmm(scale, prevH:t(), da:narrow(2, 1, 2 * H))
    gWh:narrow(2, 2 * H + 1, H):addmm(scale, rh:t(), dn)
    self.gradBias:add(scale, da:sum(1):view(3 * H))
    -- dh(t-1) = dh . u + [dr du] Wh_ru^T + (dn Whn^T) . r
    rh:mm(dn, WhN:t()):cmul(r)
    gradNextH:cmul(u):add(rh):addmm(da:narrow(2, 1, 2 * H), WhRU:t())
  end
  self.grad_h0:resizeAs(gradNextH):copy(gradNextH)
  self.grad_x = self.batchfirst and gradX:transpose(1, 2) or gradX
  self.gradPrevOutput = nil
  self.userGradPrevOutput = self.grad_h0
  self.gradInput = self._return_grad_h0 and { self.grad_h0, self.grad_x } or self.grad_x
  return self.gradInput
end

SeqGRU.updateGradInput = nn.SeqLSTM.updateGradInput
SeqGRU.accGradParameters = nn.SeqLSTM.accGradParameters
SeqGRU.remember = seqState.remember
SeqGRU.training = nn.SeqLSTM.training
SeqGRU.evaluate = nn.SeqLSTM.evaluate
SeqGRU.maskZero = nn.SeqLSTM.maskZero

function SeqGRU:forget() self.h0:resize(0) end

function SeqGRU:clearState()
  for _, name in ipairs({ 'gates', 'buffer1', 'buffer2', 'grad_a_buffer', 'grad_h0' }) do self[name]:set() end
  self.grad_x = torch.isTensor(self.grad_x) and self.grad_x:set() or self.grad_x
  self._grad_x, self._output, self._h0 = nil, nil, nil
  self.output:set()
  self.gradInput = nil
  self.zeroMask, self._zeroMask = nil, nil
  self.userGradPrevOutput, self.gradPrevOutput = nil, nil
end

function SeqGRU:type(type, ...)
  self.zeroMask, self._zeroMask, self._h0 = nil, nil, nil
  return parent.type(self, type, ...)
end

-- An nn.GRU with the same parameters (weights transposed, same r u n blocks).
function SeqGRU:toGRU()
  local D, H = self.inputSize, self.outputSize
  local gru = nn.GRU(D, H)
  local params, gradParams = gru:parameters()
  for _, pair in ipairs({ { self.weight, self.bias, params }, { self.gradWeight, self.gradBias, gradParams } }) do
    local weight, bias, dest = pair[1], pair[2], pair[3]
    local Wx, Wh = weight:narrow(1, 1, D), weight:narrow(1, D + 1, H)
    dest[1]:t():copy(Wx:narrow(2, 1, 2 * H)) -- reset and update gates
    dest[2]:copy(bias:narrow(1, 1, 2 * H))
    dest[3]:t():copy(Wh:narrow(2, 1, 2 * H))
    dest[4]:t():copy(Wx:narrow(2, 2 * H + 1, H)) -- candidate
    dest[5]:copy(bias:narrow(1, 2 * H + 1, H))
    dest[6]:t():copy(Wh:narrow(2, 2 * H + 1, H))
  end
  return gru
end
