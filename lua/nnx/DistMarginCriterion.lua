-- A multi-target margin loss. Each row of target lists the row's target classes (1-based),
-- ended by a 0 or the row's end; with m the smallest input among the targets, the loss is
-- sum over the non-target classes d of max(0, 1 - m + input[d]), divided by the number of
-- classes when sizeAverage (not by the batch size, as nnx).
local DistMarginCriterion, parent = torch.class('nn.DistMarginCriterion', 'nn.Criterion')

function DistMarginCriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
end

-- Rows of input and target as 2D views, checked; and each row's target classes.
function DistMarginCriterion:_rows(input, target)
  local bad = input:dim() < 1 or input:dim() > 2 or target:nElement() ~= input:nElement()
  if bad then
    error(('nn.DistMarginCriterion: expected a vector or matrix input and a target of its size, got [%s] and [%s]')
      :format(table.concat(input:size():totable(), 'x'), table.concat(target:size():totable(), 'x')), 3)
  end
  local dim = input:size(input:dim())
  local x = input:contiguous():view(-1, dim)
  local t = target:contiguous():view(-1, dim)
  local classes = {}
  for r = 1, t:size(1) do
    local list, isTarget = {}, {}
    for m = 1, dim do
      local c = t[r][m]
      if c == 0 then break end
      if c < 0 or c > dim or c % 1 ~= 0 then
        error(('nn.DistMarginCriterion: target %s out of range 1..%d'):format(tostring(c), dim), 3)
      end
      list[#list + 1], isTarget[c] = c, true
    end
    if #list == 0 then error('nn.DistMarginCriterion: a row has no target', 3) end
    classes[r] = {list = list, isTarget = isTarget}
  end
  return x, classes, dim
end

-- The target class with the smallest input in row r of x.
local function weakestTarget(xr, list)
  local best = list[1]
  for _, c in ipairs(list) do
    if xr[c] < xr[best] then best = c end
  end
  return best
end

function DistMarginCriterion:updateOutput(input, target)
  local x, classes, dim = self:_rows(input, target)
  local sum = 0
  for r = 1, x:size(1) do
    local xr, cls = x[r], classes[r]
    local m = xr[weakestTarget(xr, cls.list)]
    for d = 1, dim do
      if not cls.isTarget[d] then sum = sum + math.max(0, 1 - m + xr[d]) end
    end
  end
  self.output = self.sizeAverage and sum / dim or sum
  return self.output
end

function DistMarginCriterion:updateGradInput(input, target)
  local x, classes, dim = self:_rows(input, target)
  local g = self.sizeAverage and 1 / dim or 1
  self.gradInput:resizeAs(input):zero()
  local grad = self.gradInput:view(-1, dim)
  for r = 1, x:size(1) do
    local xr, cls, gr = x[r], classes[r], grad[r]
    local weakest = weakestTarget(xr, cls.list)
    local m, total = xr[weakest], 0
    for d = 1, dim do
      if not cls.isTarget[d] and 1 - m + xr[d] > 0 then
        gr[d] = g
        total = total + g
      end
    end
    gr[weakest] = -total
  end
  return self.gradInput
end
