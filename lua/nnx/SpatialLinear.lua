-- A Linear(fanin, fanout) applied at every pixel of a fanin x H x W image (a 1x1 convolution):
-- output[o][y][x] = bias[o] + sum_i weight[o][i] * input[i][y][x].
local SpatialLinear, parent = torch.class('nn.SpatialLinear', 'nn.Module')

function SpatialLinear:__init(fanin, fanout)
  parent.__init(self)
  self.fanin, self.fanout = fanin or 1, fanout or 1
  for _, n in ipairs({self.fanin, self.fanout}) do
    if type(n) ~= 'number' or n < 1 or n % 1 ~= 0 then
      error(('nn.SpatialLinear: fanin and fanout must be positive integers (got %s, %s)')
        :format(tostring(fanin), tostring(fanout)), 2)
    end
  end
  self.weightDecay = 0
  self.weight = torch.Tensor(self.fanout, self.fanin)
  self.bias = torch.Tensor(self.fanout)
  self.gradWeight = torch.Tensor(self.fanout, self.fanin):zero()
  self.gradBias = torch.Tensor(self.fanout):zero()
  self:reset()
end

function SpatialLinear:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.fanout)
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv)
  return self
end

-- Weight decay applied in place: the parameters shrink by decay times themselves.
function SpatialLinear:decayParameters(decay)
  self.weight:add(-decay, self.weight)
  self.bias:add(-decay, self.bias)
end

-- t (C x H x W) as a C x HW matrix, checked against the expected plane count.
function SpatialLinear:_flat(t, C, what)
  if t:dim() ~= 3 or t:size(1) ~= C then
    error(('nn.SpatialLinear: %s must be %d x H x W, got size [%s]')
      :format(what, C, table.concat(t:size():totable(), 'x')), 3)
  end
  return t:contiguous():view(C, t:size(2) * t:size(3))
end

function SpatialLinear:updateOutput(input)
  local x = self:_flat(input, self.fanin, 'input')
  self.output:resize(self.fanout, input:size(2), input:size(3))
  local y = self.output:view(self.fanout, x:size(2))
  y:copy(self.bias:view(self.fanout, 1):expandAs(y)):addmm(self.weight, x)
  return self.output
end

function SpatialLinear:updateGradInput(input, gradOutput)
  local g = self:_flat(gradOutput, self.fanout, 'gradOutput')
  self.gradInput:resizeAs(input)
  self.gradInput:view(self.fanin, g:size(2)):mm(self.weight:t(), g)
  return self.gradInput
end

function SpatialLinear:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local x = self:_flat(input, self.fanin, 'input')
  local g = self:_flat(gradOutput, self.fanout, 'gradOutput')
  self.gradWeight:addmm(scale, g, x:t())
  self.gradBias:add(scale, g:sum(2):view(self.fanout))
  if self.weightDecay ~= 0 then self.gradWeight:add(self.weightDecay, self.weight) end
end

function SpatialLinear:__tostring__()
  return ('%s(%d -> %d)'):format(torch.type(self), self.fanin, self.fanout)
end
