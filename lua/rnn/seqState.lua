-- Shared by SeqLSTM and SeqGRU (whole-sequence recurrent layers computing their own gradients):
-- the input forms, the initial state rules (remember modes, userPrev*), and zero masking.
local seqState = {}

local function checkSize(owner, what, x, dims)
  local ok = x:dim() == #dims
  for i, d in ipairs(dims) do ok = ok and x:size(i) == d end
  if not ok then
    local want = table.concat(dims, 'x')
    local got = table.concat(x:size():totable(), 'x')
    error(('%s: %s should be %s, got %s'):format(owner, what, want, got), 4)
  end
end

-- Splits input ({c0, h0, x} when withCell, {h0, x} or x) and returns c0, h0, x (seqlen x batch x
-- inputSize) and gradOutput, both made time-first when batchfirst.
function seqState.prepare(self, input, gradOutput, withCell, hiddenSize, outputSize, inputSize)
  local owner = torch.type(self)
  local c0, h0, x
  if torch.type(input) == 'table' and #input == 3 and withCell then
    c0, h0, x = unpack(input)
  elseif torch.type(input) == 'table' and #input == 2 then
    h0, x = unpack(input)
  elseif torch.isTensor(input) then
    x = input
  else
    error(('%s: invalid input: expecting x%s, got %s'):format(owner,
      withCell and ', {h0, x} or {c0, h0, x}' or ' or {h0, x}', torch.type(input)), 3)
  end
  if x:dim() ~= 3 then error(('%s: only supports batch mode (a 3D input), got %dD'):format(owner, x:dim()), 3) end
  if self.batchfirst then
    x = x:transpose(1, 2)
    gradOutput = gradOutput and gradOutput:transpose(1, 2) or nil
  end
  local T, N = x:size(1), x:size(2)
  checkSize(owner, 'input x', x, { T, N, inputSize })
  if h0 then checkSize(owner, 'h0', h0, { N, outputSize }) end
  if c0 then checkSize(owner, 'c0', c0, { N, hiddenSize }) end
  if gradOutput then checkSize(owner, 'gradOutput', gradOutput, { T, N, outputSize }) end
  return c0, h0, x, gradOutput
end

-- Whether this forward continues the previous sequence (remember 'both', 'train' or 'eval').
function seqState.remembers(self)
  local mode = self._remember or 'neither'
  if self.train ~= false then return mode == 'both' or mode == 'train' end
  return mode == 'both' or mode == 'eval'
end

-- Fills the state buffer: from user (userPrevOutput/userPrevCell), else the last step of
-- previous (when remembering), else zeros of N x size.
function seqState.initial(self, buffer, user, previous, N, size, what)
  if user then
    if user:size(1) ~= N then
      error(('%s: batch sizes must be consistent with %s (%d vs %d)'):format(torch.type(self), what, user:size(1), N), 3)
    end
    buffer:resizeAs(user):copy(user)
  elseif buffer:nElement() == 0 or not seqState.remembers(self) then
    buffer:resize(N, size):zero()
  else
    if previous:size(2) ~= N then
      error(('%s: batch sizes must be constant to remember states (%d vs %d)'):format(torch.type(self), previous:size(2), N), 3)
    end
    buffer:copy(previous[previous:size(1)])
  end
  return buffer
end

-- self.zeroMask: a ByteTensor with 1 for the rows of x (batch x inputSize) that are all zeros.
function seqState.zeroRows(self, x)
  self._zeroMask = self._zeroMask or x.new()
  self._zeroMask:norm(x, 2, 2)
  self.zeroMask = self.zeroMask or torch.ByteTensor()
  self.zeroMask:resize(self._zeroMask:size()):copy(self._zeroMask:eq(0))
  return self.zeroMask
end

-- Zeroes the rows selected by mask (batch x 1) in each tensor of tensors.
function seqState.maskRows(tensors, mask)
  for _, t in ipairs(tensors) do t:maskedFill(mask:expandAs(t), 0) end
end

function seqState.remember(self, remember)
  return nn.AbstractSequencer.remember(self, remember)
end

return seqState
