-- Multi-label hinge loss: each sample lists its target classes first in its target row (1-based,
-- ended by a 0 or the row's end); loss = sum over listed j and unlisted d of
-- max(0, 1 - x[j] + x[d]) / #x, averaged over samples when sizeAverage. self.isTarget marks
-- the listed classes as torch7's does.
local check = require 'torch.core.check'
local targets = require 'nn.util.targets'
local MultiLabelMarginCriterion, parent =
  torch.class('nn.MultiLabelMarginCriterion', 'nn.Criterion')

function MultiLabelMarginCriterion:__init()
  parent.__init(self)
  self.sizeAverage = true
  self.isTarget = torch.Tensor()
end

-- Validates; fills self.isTarget; returns the target, the sample count and the class count.
local function frames(self, input, target)
  local name = torch.type(self)
  local nframe, dim = targets.frames(self, input)
  check.tensorOf(name, target, 'target')
  -- the kernels walk the target with the input's rows and columns: same sizes, not just count
  if not target:isSameSizeAs(input) then
    check.error(('%s: inconsistent target size %s for input of size %s'):format(
      name, check.sizestr(target), check.sizestr(input)))
  end
  if target:nElement() > 0 and not (target:min() >= 0 and target:max() <= dim) then
    check.error(('%s: target out of range, expected class indices in [1, %d] or 0, got values in [%s, %s]')
      :format(name, dim, tostring(target:min()), tostring(target:max())))
  end
  self.isTarget = self.isTarget:typeAs(input):resize(target:size()):zero()
  local ip, irs, ics = targets.rows(self.isTarget)
  local tp, trs, tcs = targets.rows(target)
  for i = 0, nframe - 1 do
    for k = 0, dim - 1 do
      local c = math.floor(tonumber(tp[i * trs + k * tcs]))
      if c == 0 then break end
      ip[i * irs + (c - 1) * ics] = 1
    end
  end
  return target, nframe, dim
end

-- The summed hinges max(0, 1 - x[j] + x[d]) over listed classes j and unlisted d of every
-- sample; with gp (gradInput's pointer and steps), each active hinge also moves g
-- from gradInput[j] to gradInput[d].
local function hinges(self, input, target, nframe, dim, g, gp, grs, gcs)
  local p, rs, cs = targets.rows(input)
  local ip, irs, ics = targets.rows(self.isTarget)
  local tp, trs, tcs = targets.rows(target)
  local sum = 0
  for i = 0, nframe - 1 do
    local row, irow = i * rs, i * irs
    for k = 0, dim - 1 do
      local j = math.floor(tonumber(tp[i * trs + k * tcs])) - 1
      if j < 0 then break end
      local xj = tonumber(p[row + j * cs])
      for d = 0, dim - 1 do
        -- branch-free unless a gradient is wanted (isTarget holds 0 or 1)
        local h = math.max(0, 1 - xj + tonumber(p[row + d * cs])) * (1 - ip[irow + d * ics])
        sum = sum + h
        if gp and h > 0 then
          local grow = i * grs
          gp[grow + j * gcs] = gp[grow + j * gcs] - g
          gp[grow + d * gcs] = gp[grow + d * gcs] + g
        end
      end
    end
  end
  return sum
end

function MultiLabelMarginCriterion:updateOutput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local sum = hinges(self, input, t, nframe, dim) / dim
  if self.sizeAverage then sum = sum / nframe end
  self.output = sum
  return sum
end

function MultiLabelMarginCriterion:updateGradInput(input, target)
  local t, nframe, dim = frames(self, input, target)
  local g = self.sizeAverage and 1 / (nframe * dim) or 1 / dim
  self.gradInput:resizeAs(input):zero()
  hinges(self, input, t, nframe, dim, g, targets.rows(self.gradInput))
  return self.gradInput
end
