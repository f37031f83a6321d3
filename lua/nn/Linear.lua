-- y = W x + b for a vector x (inputSize) or each row of a matrix (nframe x inputSize).
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local Linear, parent = torch.class('nn.Linear', 'nn.Module')

function Linear:__init(inputSize, outputSize, bias)
  parent.__init(self)
  check.int(torch.type(self), inputSize, 'inputSize', 0)
  check.int(torch.type(self), outputSize, 'outputSize', 0)
  self.weight = torch.Tensor(outputSize, inputSize)
  self.gradWeight = torch.Tensor(outputSize, inputSize)
  if bias ~= false then
    self.bias = torch.Tensor(outputSize)
    self.gradBias = torch.Tensor(outputSize)
  end
  self:reset()
end

function Linear:noBias()
  self.bias, self.gradBias = nil, nil
  return self
end

-- uniform(-stdv, stdv); by default stdv = 1/sqrt(inputSize), else the given stdv scaled so
-- that the uniform draw has that standard deviation.
function Linear:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.weight:size(2))
  self.weight:uniform(-stdv, stdv)
  if self.bias then self.bias:uniform(-stdv, stdv) end
  return self
end

local function checkInput(self, input)
  local nd = torch.isTensor(input) and input:dim() or 0
  if nd ~= 1 and nd ~= 2 then
    check.error(('nn.Linear: input must be a vector or a matrix, got %s'):format(
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  if input:size(nd) ~= self.weight:size(2) then
    check.error(('nn.Linear: size mismatch, input size %s does not match inputSize %d'):format(
      check.sizestr(input), self.weight:size(2)))
  end
  return nd
end

-- A vector of nframe ones, for the bias terms of a batch.
local function ones(self, input, nframe)
  self.addBuffer = self.addBuffer or input.new()
  if self.addBuffer:nElement() ~= nframe then self.addBuffer:resize(nframe):fill(1) end
  return self.addBuffer
end

-- The batch passes are ops of the tensors' backend (linear_forward, linear_grad_input,
-- linear_acc_grad: BLAS on the memory, no views or product checks per call) when every operand
-- is a contiguous tensor of the result's floating type with the element count expected, not 0,
-- and none shares memory with the result (`fast`, written out per operand: a loop over them on
-- every call would abort LuaJIT's traces). Otherwise the tensor ops run (and raise what is
-- wrong). The products and the order of the bias terms are addmm's / addr's / addmv's.
local floating = { ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true,
                   ['torch.CudaTensor'] = true, ['torch.CudaDoubleTensor'] = true }

-- torch.core's structure readers serve tensors of every device (sizes and strides only); the
-- methods t:nElement() and t:isContiguous() are tail calls, which abort traces when many.
local structure = require 'torch.core.apply'
local numel, isContiguous = structure.numel, structure.isContiguous

local function whole(t, n) return n > 0 and numel(t) == n and isContiguous(t) end

-- t (n elements, contiguous) lies apart from result's elements: another storage, or another
-- range of one storage (the graph executor's arena holds many tensors)
local function apart(result, t, n)
  if t:storage() ~= result:storage() then return true end
  local r, p = result:storageOffset(), t:storageOffset()
  return p + n <= r or r + numel(result) <= p
end

local function fast(result, t, n)
  if not t then return true end
  return getmetatable(t) == getmetatable(result) and whole(t, n) and apart(result, t, n)
end

local function fastResult(result, n) return floating[torch.typename(result)] and whole(result, n) end

function Linear:updateOutput(input)
  local nd = checkInput(self, input)
  local out = self.output
  if nd == 2 then
    local n, O, I = input:size(1), self.weight:size(1), self.weight:size(2)
    if out:dim() ~= 2 or out:size(1) ~= n or out:size(2) ~= O then out:resize(n, O) end
    local bias, one = self.bias, self.bias and ones(self, input, n)
    if fastResult(out, n * O) and fast(out, input, n * I) and fast(out, self.weight, O * I)
        and fast(out, bias, O) and fast(out, one, n) then
      backend.of(out).linear_forward(out, input, self.weight, bias, one)
      return out
    end
  end
  if nd == 1 then
    out:resize(self.weight:size(1))
    if self.bias then out:copy(self.bias) else out:zero() end
    out:addmv(1, self.weight, input)
  else
    local nframe = input:size(1)
    out:resize(nframe, self.weight:size(1))
    out:addmm(0, out, 1, input, self.weight:t())
    if self.bias then out:addr(1, ones(self, input, nframe), self.bias) end
  end
  return out
end

local function checkGradOutput(self, input, gradOutput)
  local nd = checkInput(self, input)
  local expect = nd == 1 and 1 or input:size(1)
  if not torch.isTensor(gradOutput) or gradOutput:dim() ~= nd
      or gradOutput:size(nd) ~= self.weight:size(1) or (nd == 2 and gradOutput:size(1) ~= expect) then
    check.error(('nn.Linear: gradOutput size %s does not match output size %s'):format(
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      nd == 1 and tostring(self.weight:size(1)) or expect .. 'x' .. self.weight:size(1)))
  end
  return nd
end

function Linear:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local nd = checkGradOutput(self, input, gradOutput)
  local gi = self.gradInput
  gi:resizeAs(input)
  if nd == 2 then
    local n, O, I = input:size(1), self.weight:size(1), self.weight:size(2)
    if fastResult(gi, n * I) and fast(gi, gradOutput, n * O) and fast(gi, self.weight, O * I) then
      backend.of(gi).linear_grad_input(gi, gradOutput, self.weight)
      return gi
    end
  end
  if nd == 1 then
    self.gradInput:addmv(0, self.gradInput, 1, self.weight:t(), gradOutput)
  else
    self.gradInput:addmm(0, self.gradInput, 1, gradOutput, self.weight)
  end
  return self.gradInput
end

function Linear:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local nd = checkGradOutput(self, input, gradOutput)
  if nd == 1 then
    self.gradWeight:addr(scale, gradOutput, input)
    if self.bias then self.gradBias:add(scale, gradOutput) end
    return
  end
  local n, O, I = input:size(1), self.weight:size(1), self.weight:size(2)
  local gw, gb, one = self.gradWeight, self.bias and self.gradBias, self.bias and ones(self, input, n)
  if fastResult(gw, O * I) and fast(gw, gradOutput, n * O) and fast(gw, input, n * I)
      and (not self.bias or (gb and fastResult(gb, O) and fast(gb, gradOutput, n * O)
        and fast(gb, one, n))) then
    backend.of(gw).linear_acc_grad(gw, gb, input, gradOutput, one, scale)
  else
    self.gradWeight:addmm(scale, gradOutput:t(), input)
    if self.bias then
      self.gradBias:addmv(scale, gradOutput:t(), ones(self, input, input:size(1)))
    end
  end
end

-- Shared weights: update in place without the gradient buffers.
function Linear:sharedAccUpdateGradParameters(input, gradOutput, lr)
  self:defaultAccUpdateGradParameters(input, gradOutput, lr)
end

function Linear:clearState()
  if self.addBuffer then self.addBuffer:set() end
  return parent.clearState(self)
end

function Linear:__tostring__()
  return ('%s(%d -> %d)%s'):format(torch.type(self), self.weight:size(2), self.weight:size(1),
    self.bias and '' or ' without bias')
end
