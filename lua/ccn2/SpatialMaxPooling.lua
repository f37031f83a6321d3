-- ccn2.SpatialMaxPooling(kW, dW): kW x kW max pooling with stride dW over planes x h x w x batch,
-- windows starting at 0 and lying wholly inside the image (floor((h - kW) / dW) + 1 rows), as
-- cuda-convnet2's convLocalMaxPool; it runs as nn.SpatialMaxPooling on the batch-first view.
-- The gradient goes to the element each window took (cuda-convnet2's undo sends it to every element
-- equal to the window's max: the same but for exact ties).
local SpatialMaxPooling, parent = torch.class('ccn2.SpatialMaxPooling', 'nn.Module')

function SpatialMaxPooling:__init(kW, dW)
  parent.__init(self)
  self.kW, self.dW = kW, dW or kW
end

function SpatialMaxPooling:_pooler(input)
  ccn2.typecheck(input)
  ccn2.inputcheck(input)
  if input:size(2) < self.kW then
    error(('ccn2.SpatialMaxPooling: a %dx%d image is smaller than the %dx%d window'):format(input:size(2), input:size(2), self.kW, self.kW), 3)
  end
  if not self._pool or self._pool.output:type() ~= input:type() then
    self._pool = nn.SpatialMaxPooling(self.kW, self.kW, self.dW, self.dW):type(input:type())
  end
  return self._pool
end

function SpatialMaxPooling:updateOutput(input)
  self.output = ccn2.toBatchLast(self:_pooler(input):updateOutput(ccn2.toBatchFirst(input)))
  return self.output
end

function SpatialMaxPooling:updateGradInput(input, gradOutput)
  ccn2.typecheck(gradOutput)
  local pool = self:_pooler(input)
  local x = ccn2.toBatchFirst(input)
  pool:updateOutput(x)   -- the indices of this input's maxima
  self.gradInput = ccn2.toBatchLast(pool:updateGradInput(x, ccn2.toBatchFirst(gradOutput)))
  return self.gradInput
end

function SpatialMaxPooling:clearState()
  self._pool = nil
  return parent.clearState(self)
end

function SpatialMaxPooling:__tostring__()
  return ('%s(%dx%d, %d)'):format(torch.type(self), self.kW, self.kW, self.dW)
end
