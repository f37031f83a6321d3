-- Lp pooling over the feature dimension: windows of `width` consecutive features every `stride`
-- give (sum x^p)^(1/p), so F features become (F - width) / stride + 1. Input: features
-- [x opt1 [x opt2]], with a leading batch dimension when batch_mode.
local check = require 'torch.core.check'
local LP, parent = torch.class('nn.FeatureLPPooling', 'nn.Module')

function LP:__init(width, stride, power, batch_mode)
  parent.__init(self)
  if type(width) ~= 'number' or width < 2 or width > 16 then
    check.error('nn.FeatureLPPooling: width must be within 2 to 16, got ' .. tostring(width))
  end
  if type(stride) ~= 'number' or stride < 1 or stride > 4 then
    check.error('nn.FeatureLPPooling: stride must be within 1 to 4, got ' .. tostring(stride))
  end
  self.width, self.stride, self.power, self.batch_mode = width, stride, power, batch_mode
end

-- input as batch x features x rest, and the output's sizes
function LP:_view(input)
  local first = self.batch_mode and 2 or 1
  local nd = torch.isTensor(input) and input:dim() or 0
  if nd < first or nd > first + 2 then
    check.error(('nn.FeatureLPPooling: expected %dD to %dD input (batch_mode %s), got %s'):format(
      first, first + 2, tostring(self.batch_mode or false),
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  local F = input:size(first)
  if F < self.width then
    check.error(('nn.FeatureLPPooling: %d features (input %s) are fewer than the width %d'):format(
      F, check.sizestr(input), self.width))
  end
  local B = first == 2 and input:size(1) or 1
  local sizes = input:size()
  sizes[first] = math.floor((F - self.width) / self.stride) + 1
  return input:contiguous():view(B, F, -1), sizes
end

-- the k-th element of every window: a B x outF x rest strided view of t (B x F x rest)
function LP:_tap(t, k)
  return t:unfold(2, self.width, self.stride):select(4, k)
end

function LP:updateOutput(input)
  local x, sizes = self:_view(input)
  self._sum = self._sum or input.new()
  self._sum:resize(x:size(1), sizes[self.batch_mode and 2 or 1], x:size(3)):zero()
  for k = 1, self.width do self._sum:add(torch.pow(self:_tap(x, k), self.power)) end
  self.output:resize(sizes):copy(self._sum:pow(1 / self.power))
  return self.output
end

-- d out / d x = (x / out)^(p - 1) for every element x of the window; windows whose output is
-- 0 pass no gradient (as torch7)
function LP:updateGradInput(input, gradOutput)
  local x, sizes = self:_view(input)
  local function fits(t) return torch.isTensor(t) and t:isSize(sizes) end
  if not fits(gradOutput) then
    check.error(('nn.FeatureLPPooling: gradOutput size %s does not match output size %s'):format(
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      table.concat(sizes:totable(), 'x')))
  end
  if not fits(self.output) then
    check.error('nn.FeatureLPPooling: call updateOutput with this input before updateGradInput')
  end
  local out = self.output:contiguous():view(self._sum:size())
  local go = gradOutput:contiguous():view(self._sum:size())
  self.gradInput:resize(x:size()):zero()
  self._term = self._term or input.new()
  local dead = out:eq(0)
  for k = 1, self.width do
    self._term:cdiv(self:_tap(x, k), out):pow(self.power - 1):cmul(go):maskedFill(dead, 0)
    self:_tap(self.gradInput, k):add(self._term)
  end
  self.gradInput = self.gradInput:view(input:size())
  return self.gradInput
end

function LP:clearState()
  nn.utils.clear(self, '_sum', '_term')
  return parent.clearState(self)
end

function LP:__tostring__()
  return ('%s(w%d s%d power %s batch %s)'):format(torch.type(self), self.width, self.stride,
    tostring(self.power), tostring(self.batch_mode or false))
end
