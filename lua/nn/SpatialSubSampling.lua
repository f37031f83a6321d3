-- Per-plane weighted sums of kW x kH windows (stride dW,dH): out[c] = bias[c] + weight[c] *
-- (the window's sum), through the average pooling kernel (sums: divide off) and plane maps.
local pool = require 'nn.util.pool'
local backend = require 'torch.backend'
local shape = require 'nn.util.shape'
local SpatialSubSampling, parent = torch.class('nn.SpatialSubSampling', 'nn.Module')

function SpatialSubSampling:__init(nInputPlane, kW, kH, dW, dH)
  parent.__init(self)
  self.nInputPlane, self.kW, self.kH = nInputPlane, kW, kH
  self.dW, self.dH = dW or 1, dH or 1
  shape.positive(self, 'nInputPlane, kernel sizes and strides', nInputPlane, kW, kH, self.dW, self.dH)
  self.weight = torch.Tensor(nInputPlane)
  self.bias = torch.Tensor(nInputPlane)
  self.gradWeight = torch.Tensor(nInputPlane)
  self.gradBias = torch.Tensor(nInputPlane)
  self:reset()
end

function SpatialSubSampling:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kW * self.kH)
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv)
end

function SpatialSubSampling:_geometry(input)
  local g = pool.geometry(self, input, 2, pool.params(self))
  if g.C ~= self.nInputPlane then
    shape.fail(self, 'expected input with %d planes, got %d (input size %s)', self.nInputPlane, g.C,
      table.concat(input:size():totable(), 'x'))
  end
  return g, g.O[2] * g.O[3]
end

function SpatialSubSampling:updateOutput(input)
  local g, N = self:_geometry(input)
  pool.avgForward(self, input, g, true, false)
  backend.of(self.output).plane_map('affine', self.output, nil, self.weight, self.bias, g.B, g.C, N)
  return self.output
end

function SpatialSubSampling:updateGradInput(input, gradOutput)
  if not self.gradInput then return end
  local g, N = self:_geometry(input)
  shape.gradOutput(self, gradOutput, g.sizes)
  self._buffer = self._buffer or input.new()
  self._buffer:resize(g.sizes)
  backend.of(self._buffer).plane_map('scale', self._buffer, gradOutput:contiguous(), self.weight, nil, g.B, g.C, N)
  return pool.avgBackward(self, input, self._buffer, g, true, false)
end

function SpatialSubSampling:accGradParameters(input, gradOutput, scale)
  local g, N = self:_geometry(input)
  shape.gradOutput(self, gradOutput, g.sizes)
  self._buffer = self._buffer or input.new()
  local sums = pool.avgForward(self, input, g, true, false, self._buffer)
  gradOutput = gradOutput:contiguous()
  local ops = backend.of(sums)
  ops.plane_map('dot', sums, gradOutput, self.gradWeight, nil, g.B, g.C, N, scale)
  ops.plane_acc_sum(self.gradBias, gradOutput, g.B, g.C, N, scale or 1)
end

function SpatialSubSampling:clearState() return parent.clearState(self, '_buffer') end
