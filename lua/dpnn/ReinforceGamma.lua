-- Samples Gamma(shape, scale) (training; evaluation outputs the mean shape * scale). Input: the
-- shape, with scale fixed at construction, or {shape, scale} (both learnt); scale may lack
-- shape's batch dimension. Gradients of log p (times -reward):
-- d/dshape = log x - log scale - digamma(shape), d/dscale = x / scale^2 - shape / scale.
-- Sampling (Marsaglia-Tsang) and digamma are computed here: dpnn used randomkit and cephes.
local ReinforceGamma, parent = torch.class('nn.ReinforceGamma', 'nn.Reinforce')

function ReinforceGamma:__init(scale, stochastic)
  parent.__init(self, stochastic)
  self.scale = scale
  if not scale then self.gradInput = { torch.Tensor(), torch.Tensor() } end
end

-- One Gamma(shape, 1) draw (Marsaglia & Tsang, 2000; shape < 1 boosted by U^(1/shape)).
local function gammaDraw(shape)
  if shape < 1 then return gammaDraw(shape + 1) * torch.uniform() ^ (1 / shape) end
  local d = shape - 1 / 3
  local c = 1 / math.sqrt(9 * d)
  while true do
    local z, v
    repeat
      z = torch.normal()
      v = 1 + c * z
    until v > 0
    v = v * v * v
    local u = torch.uniform()
    if math.log(u) < 0.5 * z * z + d - d * v + d * math.log(v) then return d * v end
  end
end

-- digamma(x) for x > 0: recurrence up to x >= 6, then the asymptotic series.
local function digamma(x)
  local result = 0
  while x < 6 do
    result = result - 1 / x
    x = x + 1
  end
  local f = 1 / (x * x)
  return result + math.log(x) - 0.5 / x
    - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))))
end

function ReinforceGamma:_shapeScale(input)
  local shape, scale = input, self.scale
  if torch.type(input) == 'table' then
    if #input ~= 2 then error('nn.ReinforceGamma: expecting {shape, scale}', 3) end
    shape, scale = input[1], input[2]
  end
  if not scale then error('nn.ReinforceGamma: no scale: give one to the constructor or input {shape, scale}', 3) end
  if type(scale) == 'number' then return shape, shape.new():resizeAs(shape):fill(scale), false end
  if scale:dim() == shape:dim() then return shape, scale, false end
  if scale:dim() + 1 ~= shape:dim() then
    error(('nn.ReinforceGamma: scale (%dD) should have shape\'s dimensions (%dD) or one fewer'):format(scale:dim(), shape:dim()), 3)
  end
  return shape, scale:view(1, table.unpack(scale:size():totable())):expandAs(shape), true
end

function ReinforceGamma:updateOutput(input)
  local shape, scale = self:_shapeScale(input)
  self.output:resizeAs(shape)
  if self:_sampling() then
    local out, k, theta = self.output:view(-1), shape:contiguous():view(-1), scale:contiguous():view(-1)
    for i = 1, out:nElement() do out[i] = gammaDraw(k[i]) * theta[i] end
  else
    self.output:copy(shape):cmul(scale)
  end
  return self.output
end

function ReinforceGamma:updateGradInput(input, gradOutput)
  local shape, scale, expanded = self:_shapeScale(input)
  local gradShape, gradScale = self.gradInput, nil
  if torch.type(input) == 'table' then gradShape, gradScale = self.gradInput[1], self.gradInput[2] end
  gradShape:resizeAs(shape):copy(shape):apply(digamma):mul(-1)
  gradShape:add(torch.log(self.output)):add(-1, torch.log(scale))
  gradShape:cmul(self:rewardAs(shape)):mul(-1)
  if gradScale then
    local g = torch.cdiv(self.output, torch.cmul(scale, scale)):add(-1, torch.cdiv(shape, scale))
    g:cmul(self:rewardAs(shape)):mul(-1)
    gradScale:resizeAs(input[2]):copy(expanded and g:sum(1):viewAs(input[2]) or g)
  end
  return self.gradInput
end
