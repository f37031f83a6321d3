-- Data augmentation: during training, adds to every pixel of each channel c of each image one
-- offset drawn uniformly from [-range[c], range[c]]. Input: channels x h x w or a batch of them.
-- Subclasses draw the offsets differently (_sampleNoise).
local SimpleColorTransform, parent = torch.class('nn.SimpleColorTransform', 'nn.Module')

function SimpleColorTransform:__init(inputChannels, range)
  parent.__init(self)
  self.train = true
  self.inputChannels = inputChannels
  if range then
    if range:nElement() ~= inputChannels then
      error(("nn.SimpleColorTransform: number of input channels (%d) and number of range values (%d) don't match"):format(inputChannels, range:nElement()), 2)
    end
    self.range = range
  end
end

-- batchSize x channels offsets into self.noise.
function SimpleColorTransform:_sampleNoise(batchSize)
  self.noise:resize(batchSize, self.inputChannels)
  for c = 1, self.inputChannels do self.noise:select(2, c):uniform(-self.range[c], self.range[c]) end
end

function SimpleColorTransform:updateOutput(input)
  self.output:resizeAs(input):copy(input)
  if not self.train then return self.output end
  local batch = input:dim() == 4
  if input:dim() ~= 3 and not batch then
    error(('%s: invalid input dimensionality: expecting 3D or 4D, got %dD'):format(torch.type(self), input:dim()), 2)
  end
  local channels = input:size(batch and 2 or 1)
  if channels ~= self.inputChannels then
    error(('%s: expecting %d channels, got %d'):format(torch.type(self), self.inputChannels, channels), 2)
  end
  self.noise = self.noise or input.new()
  local batchSize = batch and input:size(1) or 1
  self:_sampleNoise(batchSize)
  local offsets = self.noise:view(batchSize, channels, 1, 1)
  if not batch then offsets = offsets[1] end
  self.output:add(offsets:expandAs(input))
  return self.output
end

function SimpleColorTransform:updateGradInput(input, gradOutput)
  if not self.train then error(torch.type(self) .. ': backprop only defined while training', 2) end
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  return self.gradInput
end

function SimpleColorTransform:type(name, tensorCache)
  self.noise = nil
  return parent.type(self, name, tensorCache)
end

function SimpleColorTransform:__tostring__()
  return ('%s channels: %d'):format(torch.type(self), self.inputChannels)
end
