-- During training, zeroes a band of rows or columns (a fraction p of them) along one randomly
-- chosen edge (top, bottom, left or right) of each image, rescaling the rest by 1 / (1 - p):
-- imperfect bounding boxes. Input: nfeat x h x w or batch x nfeat x h x w.
local SpatialRegionDropout, parent = torch.class('nn.SpatialRegionDropout', 'nn.Module')

function SpatialRegionDropout:__init(p)
  parent.__init(self)
  self:setp(p or 0.2)
  self.train = true
  self.noise = torch.Tensor()
end

function SpatialRegionDropout:setp(p)
  if type(p) ~= 'number' or p >= 1 or p < 0 then
    error(('<SpatialRegionDropout> illegal percentage, must be 0 <= p < 1, got %s'):format(tostring(p)), 3)
  end
  self.p = p
end

function SpatialRegionDropout:updateOutput(input)
  self.output:resizeAs(input):copy(input)
  if not self.train then return self.output end
  if input:dim() ~= 3 and input:dim() ~= 4 then
    error(('nn.SpatialRegionDropout: input must be 4D (nbatch, nfeat, h, w) or 3D (nfeat, h, w), got %dD'):format(input:dim()), 2)
  end
  self.noise:resizeAs(input):fill(1)
  self.regionType = torch.random(4)   -- 1 top rows, 2 bottom rows, 3 left columns, 4 right columns
  local dim = input:dim() - (self.regionType <= 2 and 1 or 0)
  local size = input:size(dim)
  local n = math.floor(size * self.p)
  if n > 0 then
    local first = (self.regionType % 2 == 1) and 1 or size - n + 1
    self.noise:narrow(dim, first, n):zero()
  end
  self.noise:div(1 - self.p)
  self.output:cmul(self.noise)
  return self.output
end

function SpatialRegionDropout:updateGradInput(input, gradOutput)
  if not self.train then error('nn.SpatialRegionDropout: backpropagation is only defined for training', 2) end
  self.gradInput:resizeAs(gradOutput):copy(gradOutput):cmul(self.noise)
  return self.gradInput
end

function SpatialRegionDropout:__tostring__()
  return ('%s p: %f'):format(torch.type(self), self.p)
end
