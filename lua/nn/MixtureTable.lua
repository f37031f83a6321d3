-- Mixture of experts: input {gater, experts}, output sum_i gater[i] * expert_i, per sample.
-- gater: n weights (one sample) or batch x n. experts: a table of n tensors shaped like the
-- output, or one tensor holding the experts stacked along dim `dim` (default 1 for a 1-D gater,
-- else 2; the gater's weights sit at that dim of the stacked view in either case).
require 'nn.utils'
local check = require 'torch.core.check'
local MixtureTable, parent = torch.class('nn.MixtureTable', 'nn.Module')

function MixtureTable:__init(dim)
  parent.__init(self)
  self.dim = check.optInt('nn.MixtureTable', dim, 'dim', 1, check.MAXDIM)
  self.size = torch.LongStorage()
  self.batchSize = 0
  self.size2 = torch.LongStorage()
  self.backwardSetup = false
  self.gradInput = {}
end

-- Validates; sets self.dimG (the gater's expert dim) and self._gaterView, the gater viewed
-- as the stacked experts with 1s in the other dims. Returns gater, experts.
local function setup(self, input)
  local name = torch.type(self)
  if torch.type(input) ~= 'table' or not torch.isTensor(input[1]) or input[2] == nil then
    check.error(name .. ': input must be a table {gater, experts}')
  end
  local gater, experts = input[1], input[2]
  if gater:dim() ~= 1 and gater:dim() ~= 2 then
    check.error(('%s: gater must be 1-D or 2-D, got %s'):format(name, check.sizestr(gater)))
  end
  -- the mixture multiplies the gater's weights into the experts: one element type (the tensor
  -- methods raised otherwise, naming cmul)
  local function sameType(expert, what)
    if torch.isTensor(expert) and expert:type() ~= gater:type() then
      check.error(('%s: %s is a %s of size %s, expected a %s (the gater\'s type)'):format(
        name, what, expert:type(), check.sizestr(expert), gater:type()))
    end
  end
  if torch.type(experts) == 'table' then
    for i = 1, #experts do sameType(experts[i], ('expert %d'):format(i)) end
  else
    sameType(experts, 'experts')
  end
  self.dimG = gater:dim()
  self.dim = self.dim or self.dimG
  local n = gater:size(self.dimG)
  self.table = torch.type(experts) == 'table'
  local stackedDims
  if self.table then
    if #experts ~= n then
      check.error(('%s: %d experts for %d gater outputs; there should be one gater output per expert')
        :format(name, #experts, n))
    end
    for i = 1, n do
      if not torch.isTensor(experts[i]) or not experts[i]:isSameSizeAs(experts[1]) then
        check.error(('%s: expert %d must be a tensor of size %s'):format(name, i, check.sizestr(experts[1])))
      end
    end
    stackedDims = experts[1]:dim() + 1
  else
    check.tensorOf(name, experts, 'experts')
    stackedDims = experts:dim()
    if self.dim > stackedDims or experts:size(self.dim) ~= n then
      check.error(('%s: experts of size %s do not hold %d experts along dim %d'):format(
        name, check.sizestr(experts), n, self.dim))
    end
  end
  if self.dim > stackedDims or (self.dimG == 2 and self.dim == 1) then
    check.error(('%s: dim %d out of range for experts with %d dims'):format(name, self.dim, stackedDims))
  end
  self.size:resize(stackedDims):fill(1)
  if self.dimG == 2 then self.size[1] = gater:size(1) end
  self.size[self.dim] = n
  self.batchSize = self.dimG == 2 and gater:size(1) or 1
  self._gaterView = self._gaterView or gater.new()
  self._gaterView:view(gater:contiguous(), self.size)
  return gater, experts
end

function MixtureTable:updateOutput(input)
  local _, experts = setup(self, input)
  if self.table then
    self.output:resizeAs(experts[1]):zero()
    for i, expert in ipairs(experts) do
      self.output:addcmul(expert, self._gaterView:select(self.dim, i):expandAs(expert))
    end
  else
    self._expert = self._expert or experts.new()
    self._expert:cmul(self._gaterView:expandAs(experts), experts)
    self.output:sum(self._expert, self.dim)
    self.output:resizeAs(experts:select(self.dim, 1))
  end
  return self.output
end

-- The gater's gradient for one expert: gradOutput * expert summed over all but the batch dim.
local function gateGrad(self, prod)
  local flat = prod:contiguous():view(self.batchSize, -1)
  self._sum = self._sum or prod.new()
  return self._sum:sum(flat, 2):view(self.batchSize)
end

function MixtureTable:updateGradInput(input, gradOutput)
  local gater, experts = setup(self, input)
  if not torch.isTensor(gradOutput) or gradOutput:nElement() ~= self.output:nElement() then
    check.error(('%s: gradOutput must be a tensor of size %s'):format(torch.type(self),
      check.sizestr(self.output)))
  end
  self.gradInput[1] = self.gradInput[1] or gater.new()
  local gaterGrad = self.gradInput[1]:resizeAs(gater)
  local gaterCols = self.dimG == 2 and gaterGrad or gaterGrad:view(1, -1)
  self._expert2 = self._expert2 or gater.new()
  if self.table then
    local grads = torch.type(self.gradInput[2]) == 'table' and self.gradInput[2] or {}
    for i, expert in ipairs(experts) do
      self._expert2:resizeAs(expert):cmul(gradOutput:viewAs(expert), expert)
      gaterCols:select(2, i):copy(gateGrad(self, self._expert2))
      grads[i] = grads[i] or expert.new()
      grads[i]:resizeAs(expert):cmul(self._gaterView:select(self.dim, i):expandAs(expert),
        gradOutput:viewAs(expert))
    end
    for i = #grads, #experts + 1, -1 do grads[i] = nil end
    self.gradInput[2] = grads
  else
    self.size2:resize(experts:dim()):copy(experts:size())
    self.size2[self.dim] = 1
    local go = gradOutput:contiguous():view(self.size2):expandAs(experts)
    self._expert2:resizeAs(experts):cmul(go, experts)
    -- bring the experts' dim next to the batch dim, then sum each expert's block
    local moved = self._expert2:transpose(self.dim, self.dimG):contiguous()
    local blocks = moved:view(self.batchSize, gater:size(self.dimG), -1)
    self._sum = self._sum or gater.new()
    gaterCols:copy(self._sum:sum(blocks, 3):view(self.batchSize, -1))
    self.gradInput[2] = torch.isTensor(self.gradInput[2]) and self.gradInput[2] or experts.new()
    self.gradInput[2]:resizeAs(experts):cmul(self._gaterView:expandAs(experts), go)
  end
  return self.gradInput
end

function MixtureTable:type(name, cache)
  self._gaterView, self._expert, self._expert2, self._sum = nil, nil, nil, nil
  return parent.type(self, name, cache)
end

function MixtureTable:clearState()
  nn.utils.clear(self, '_gaterView', '_expert', '_expert2', '_sum')
  return parent.clearState(self)
end
