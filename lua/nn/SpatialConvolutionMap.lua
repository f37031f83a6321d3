-- A convolution over an explicit connection table: row k = {input plane, output plane} has
-- its own kH x kW kernel weight[k] (weight: nConnections x kH x kW). Runs as a dense
-- SpatialConvolution whose nOutputPlane x nInputPlane kernels are the table's (zero where
-- there is no connection). Also defines torch7's connection tables nn.tables.full, oneToOne,
-- random.
local shape = require 'nn.util.shape'
local SpatialConvolutionMap, parent = torch.class('nn.SpatialConvolutionMap', 'nn.Module')

nn.tables = nn.tables or {}

-- every input plane to every output plane
function nn.tables.full(nin, nout)
  local t = torch.Tensor(nin * nout, 2)
  for o = 1, nout do
    for i = 1, nin do t[(o - 1) * nin + i][1], t[(o - 1) * nin + i][2] = i, o end
  end
  return t
end

-- plane i to plane i
function nn.tables.oneToOne(nfeat)
  local t = torch.Tensor(nfeat, 2)
  for i = 1, nfeat do t[i][1], t[i][2] = i, i end
  return t
end

-- nto distinct input planes to each output plane: consecutive chunks of a random permutation,
-- drawn again once its whole chunks are used
function nn.tables.random(nin, nout, nto)
  local t = torch.Tensor(nto * nout, 2)
  local perm, chunks, chunk = torch.randperm(nin), math.floor(nin / nto), 0
  for o = 1, nout do
    for k = 1, nto do
      local row = (o - 1) * nto + k
      t[row][1], t[row][2] = perm[chunk * nto + k], o
    end
    chunk = chunk + 1
    if chunk == chunks then perm, chunk = torch.randperm(nin), 0 end
  end
  return t
end

function SpatialConvolutionMap:__init(conMatrix, kW, kH, dW, dH)
  parent.__init(self)
  if not torch.isTensor(conMatrix) or conMatrix:dim() ~= 2 or conMatrix:size(2) ~= 2 then
    shape.fail(self, 'the connection table must be an n x 2 tensor, got %s',
      torch.isTensor(conMatrix) and table.concat(conMatrix:size():totable(), 'x') or torch.type(conMatrix))
  end
  self.kW, self.kH, self.dW, self.dH = kW, kH, dW or 1, dH or 1
  shape.positive(self, 'kernel sizes and strides', kW, kH, self.dW, self.dH)
  self.connTable = conMatrix
  self.nInputPlane = self.connTable:select(2, 1):max()
  self.nOutputPlane = self.connTable:select(2, 2):max()
  self.weight = torch.Tensor(self.connTable:size(1), kH, kW)
  self.bias = torch.Tensor(self.nOutputPlane)
  self.gradWeight = torch.Tensor(self.connTable:size(1), kH, kW)
  self.gradBias = torch.Tensor(self.nOutputPlane)
  self:reset()
end

-- stdv given: uniform +-stdv*sqrt(3); else each kernel (and bias) uniform +-1/sqrt(kW*kH*fan-in
-- of its output plane), as torch7
function SpatialConvolutionMap:reset(stdv)
  if stdv then
    stdv = stdv * math.sqrt(3)
    self.weight:uniform(-stdv, stdv)
    self.bias:uniform(-stdv, stdv)
    return
  end
  local fanIn = {}
  for k = 1, self.connTable:size(1) do
    local o = self.connTable[k][2]
    fanIn[o] = (fanIn[o] or 0) + 1
  end
  for k = 1, self.connTable:size(1) do
    local s = 1 / math.sqrt(self.kW * self.kH * fanIn[self.connTable[k][2]])
    self.weight:select(1, k):uniform(-s, s)
  end
  for o = 1, self.nOutputPlane do
    local s = 1 / math.sqrt(self.kW * self.kH * (fanIn[o] or 0))
    self.bias[o] = torch.uniform(-s, s)
  end
end

-- the dense module's class, and whether its weight is nOutputPlane x nInputPlane x kH x kW
-- (else nInputPlane x nOutputPlane x ...)
SpatialConvolutionMap._denseClass, SpatialConvolutionMap._outputFirst = 'nn.SpatialConvolution', true

-- connection k's kernel in a dense weight
function SpatialConvolutionMap:_slot(w, k)
  local i, o = self.connTable[k][1], self.connTable[k][2]
  if self._outputFirst then return w[o][i] end
  return w[i][o]
end

-- The dense convolution (made without drawing random numbers), its weight filled from ours.
function SpatialConvolutionMap:_denseModule()
  local d = self._dense
  if not d or torch.type(d.weight) ~= torch.type(self.weight) then
    d = torch.factory(self._denseClass)()
    nn.Module.__init(d)
    d.nInputPlane, d.nOutputPlane, d.kW, d.kH = self.nInputPlane, self.nOutputPlane, self.kW, self.kH
    d.dW, d.dH, d.padW, d.padH, d.adjW, d.adjH = self.dW, self.dH, 0, 0, 0, 0
    d.weight = self.weight.new()
    d.gradWeight = self.weight.new()
    self._dense = d
  end
  local first, second = self.nInputPlane, self.nOutputPlane
  if self._outputFirst then first, second = second, first end
  d.weight:resize(first, second, self.kH, self.kW):zero()
  d.gradWeight:resizeAs(d.weight)
  d.bias, d.gradBias = self.bias, self.gradBias
  for k = 1, self.connTable:size(1) do self:_slot(d.weight, k):copy(self.weight[k]) end
  return d
end

function SpatialConvolutionMap:updateOutput(input)
  self.output = self:_denseModule():updateOutput(input)
  return self.output
end

function SpatialConvolutionMap:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  self.gradInput = self:_denseModule():updateGradInput(input, gradOutput)
  return self.gradInput
end

-- Uses the patches of the last updateOutput (of this same input), as SpatialConvolution.
function SpatialConvolutionMap:accGradParameters(input, gradOutput, scale)
  local d = self:_denseModule()
  d.gradWeight:zero()
  d:accGradParameters(input, gradOutput, scale)
  for k = 1, self.connTable:size(1) do
    self.gradWeight[k]:add(self:_slot(d.gradWeight, k))
  end
end

function SpatialConvolutionMap:type(type, tensorCache)
  self._dense = nil
  return parent.type(self, type, tensorCache)
end

function SpatialConvolutionMap:clearState()
  self._dense = nil
  return parent.clearState(self)
end
