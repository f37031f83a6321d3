-- y = W x + b for a vector x (inputSize) or each row of a matrix (nframe x inputSize).
local check = require 'torch.check'
local apply = require 'torch.backend.cpu.apply'
local blas = require 'torch.backend.cpu.blas'
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

-- The batch passes call BLAS straight on the buffers (no tensor views or product checks per
-- call; column-major, so each row-major matrix is its transpose) when every operand is a
-- contiguous CPU Float / Double tensor of the result's type with the element count expected,
-- not 0, and the result shares no memory with the others: direct(result, n) and operand(result,
-- n, t) (t may be nil: no bias) for each, written out (a loop over the operands on every call
-- would abort LuaJIT's traces). Otherwise the tensor ops run (and raise what is wrong). The
-- products and the order of the bias terms are addmm's / addr's / addmv's.
local function direct(result, n)
  local name = result._dt.name
  return not result._device and (name == 'Float' or name == 'Double') and n > 0
    and apply.numel(result) == n and apply.isContiguous(result)
end

-- t's n elements and result's lie apart (by address: one storage may hold both, as the
-- graph executor's arena does)
local function apart(result, t, n)
  local r, p = apply.ptr(result), apply.ptr(t)
  return p + n <= r or r + apply.numel(result) <= p
end

local function operand(result, n, t)
  return not t or (t._dt == result._dt and n > 0 and apply.numel(t) == n and apply.isContiguous(t)
    and apart(result, t, n))
end

local ptr = apply.ptr

function Linear:updateOutput(input)
  local nd = checkInput(self, input)
  local out = self.output
  if nd == 2 then
    local n, O, I = input:size(1), self.weight:size(1), self.weight:size(2)
    if out._sz[1] ~= n or out._sz[2] ~= O or #out._sz ~= 2 then out:resize(n, O) end
    local bias, one = self.bias, self.bias and ones(self, input, n)
    if direct(out, n * O) and operand(out, n * I, input) and operand(out, O * I, self.weight)
        and operand(out, O, bias) and operand(out, n, one) then
      blas.gemm(out._dt, true, false, O, n, I, 1, ptr(self.weight), I, ptr(input), I, 0, ptr(out), O)
      if bias then blas.ger(out._dt, O, n, 1, ptr(bias), 1, ptr(one), 1, ptr(out), O) end
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
    if direct(gi, n * I) and operand(gi, n * O, gradOutput) and operand(gi, O * I, self.weight) then
      blas.gemm(gi._dt, false, false, I, n, O, 1, ptr(self.weight), I, ptr(gradOutput), O, 0, ptr(gi), I)
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
  if direct(gw, O * I) and operand(gw, n * O, gradOutput) and operand(gw, n * I, input)
      and (not self.bias or (gb and direct(gb, O) and operand(gb, n * O, gradOutput)
        and operand(gb, n, one))) then
    blas.gemm(gw._dt, false, true, I, O, n, scale, ptr(input), I, ptr(gradOutput), O, 1, ptr(gw), I)
    if gb then blas.gemv(gw._dt, false, O, n, scale, ptr(gradOutput), O, ptr(one), 1, 1, ptr(gb), 1) end
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
