-- Samples mean + stdev * N(0, 1) (training; evaluation outputs the mean). The input is the
-- mean, with stdev fixed at construction, or a table {mean, stdev} (stdev then learnt), stdev
-- of mean's size or without mean's batch dimension. Gradients (times -reward):
-- d/dmean = (x - mean) / stdev^2, d/dstdev = ((x - mean)^2 - stdev^2) / stdev^3.
local ReinforceNormal, parent = torch.class('nn.ReinforceNormal', 'nn.Reinforce')

function ReinforceNormal:__init(stdev, stochastic)
  parent.__init(self, stochastic)
  self.stdev = stdev
  if not stdev then self.gradInput = { torch.Tensor(), torch.Tensor() } end
end

-- mean and stdev from the input (or the constructor).
function ReinforceNormal:_meanStdev(input)
  if torch.type(input) == 'table' then
    if #input ~= 2 then error(('nn.ReinforceNormal: expecting {mean, stdev}, got a table of %d'):format(#input), 3) end
    return input[1], input[2]
  end
  if not self.stdev then error('nn.ReinforceNormal: no stdev: give one to the constructor or input {mean, stdev}', 3) end
  return input, self.stdev
end

-- stdev as a tensor of mean's size (a view), or the number itself.
function ReinforceNormal:_stdevAs(stdev, mean)
  if type(stdev) == 'number' or stdev:dim() == mean:dim() then return stdev end
  if stdev:dim() + 1 ~= mean:dim() then
    error(('nn.ReinforceNormal: stdev (%dD) should have mean\'s dimensions (%dD) or one fewer'):format(stdev:dim(), mean:dim()), 3)
  end
  self._stdev = self._stdev or stdev.new()
  self._stdev:view(stdev, 1, table.unpack(stdev:size():totable()))
  self.__stdev = self.__stdev or stdev.new()
  return self.__stdev:expandAs(self._stdev, mean)
end

function ReinforceNormal:updateOutput(input)
  local mean, stdev = self:_meanStdev(input)
  self.output:resizeAs(mean)
  if self:_sampling() then
    self.output:normal()
    stdev = self:_stdevAs(stdev, mean)
    if type(stdev) == 'number' then self.output:mul(stdev) else self.output:cmul(stdev) end
    self.output:add(mean)
  else
    self.output:copy(mean)
  end
  return self.output
end

function ReinforceNormal:updateGradInput(input, gradOutput)
  local mean, stdev = self:_meanStdev(input)
  local gradMean, gradStdev = self.gradInput, nil
  if torch.type(input) == 'table' then gradMean, gradStdev = self.gradInput[1], self.gradInput[2] end
  local fullStdev = self:_stdevAs(stdev, mean)
  gradMean:resizeAs(mean):copy(self.output):add(-1, mean)
  if type(fullStdev) == 'number' then
    gradMean:div(fullStdev ^ 2)
  else
    gradMean:cdiv(fullStdev):cdiv(fullStdev)
  end
  gradMean:cmul(self:rewardAs(mean)):mul(-1)
  if gradStdev then
    self._var = self._var or stdev.new()
    self._var:resizeAs(stdev):copy(stdev):cmul(stdev)
    gradStdev:resizeAs(stdev):copy(self.output):add(-1, mean):pow(2):add(-1, self._var)
    self._var:cmul(stdev):add(1e-8)
    gradStdev:cdiv(self._var):cmul(self:rewardAs(stdev)):mul(-1)
  end
  return self.gradInput
end
