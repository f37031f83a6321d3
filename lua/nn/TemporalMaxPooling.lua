-- The maximum of each kW-frame window (every dW frames) of each feature of nInputFrame x
-- frameSize input (or a batch): the 2D max pooling kernel over frames x features planes with
-- kW x 1 windows. Indices are 1-based offsets in the frames x features plane (torch7 keeps the
-- frame index instead).
local pool = require 'nn.util.pool'
local temporal = require 'nn.util.temporal'
local shape = require 'nn.util.shape'
local TemporalMaxPooling, parent = torch.class('nn.TemporalMaxPooling', 'nn.Module')
TemporalMaxPooling._deviceKernel = true   -- the 2D max pooling's device passes (kW x 1 windows)

function TemporalMaxPooling:__init(kW, dW)
  parent.__init(self)
  self.kW, self.dW = kW, dW or kW
  shape.positive(self, 'kW and dW', kW, self.dW)
  self.indices = torch.LongTensor()
end

-- the input as 1 plane of frames x features per sequence, the pooling geometry, output sizes
function TemporalMaxPooling:_geometry(input)
  local batch, B, nIF, nOF = temporal.frames(self, input)
  local F = input:size(input:dim())
  local p = { k = { 1, self.kW, 1 }, d = { 1, self.dW, 1 }, pad = { 0, 0, 0 }, dil = { 1, 1, 1 } }
  local planes = input:contiguous():view(B, 1, nIF, F)
  return planes, pool.geometry(self, planes, 2, p), batch and { B, nOF, F } or { nOF, F }
end

function TemporalMaxPooling:updateOutput(input)
  local planes, g, sizes = self:_geometry(input)
  pool.maxForward(self, planes, g)
  self.output:resize(sizes)   -- the same elements, as frames x features
  self.indices:resize(sizes)
  return self.output
end

function TemporalMaxPooling:updateGradInput(input, gradOutput)
  local planes, g, sizes = self:_geometry(input)
  shape.gradOutput(self, gradOutput, sizes)
  self.indices:resize(g.sizes)
  pool.maxBackward(self, planes, gradOutput:contiguous():view(g.sizes), g)
  self.indices:resize(sizes)
  self.gradInput:resizeAs(input)
  return self.gradInput
end

function TemporalMaxPooling:clearState() return parent.clearState(self, 'indices') end
