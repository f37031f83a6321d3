-- AlexNet's PCA colour augmentation: during training, each image gets the per-channel offset
-- eigenVectors * (alpha .* eigenValues), alpha ~ N(0, std^2) per image (std 0.1).
-- eigenVectors: channels x channels, one eigenvector per column of the product (as dpnn).
local PCAColorTransform, parent = torch.class('nn.PCAColorTransform', 'nn.SimpleColorTransform')

function PCAColorTransform:__init(inputChannels, eigenVectors, eigenValues, std)
  parent.__init(self, inputChannels)
  local op = 'nn.PCAColorTransform'
  if eigenVectors:dim() ~= 2 or eigenVectors:size(1) ~= inputChannels or eigenVectors:size(2) ~= inputChannels then
    error(('%s: eigen vectors should be %dx%d, got %s'):format(op, inputChannels, inputChannels,
      table.concat(eigenVectors:size():totable(), 'x')), 2)
  end
  if eigenValues:nElement() ~= inputChannels then
    error(('%s: %d input channels but %d eigen values'):format(op, inputChannels, eigenValues:nElement()), 2)
  end
  self.eigenVectors = eigenVectors
  self.eigenValues = eigenValues
  self.std = std or 0.1
end

function PCAColorTransform:_sampleNoise(batchSize)
  self.alphas = self.alphas or self.noise.new()
  self.alphas:resize(self.inputChannels, batchSize):normal(0, self.std)
  self.alphas:cmul(self.eigenValues:view(self.inputChannels, 1):expand(self.inputChannels, batchSize))
  self.noise:resize(batchSize, self.inputChannels):zero()
  self.noise:t():addmm(self.eigenVectors, self.alphas)
end

function PCAColorTransform:type(name, tensorCache)
  self.alphas = nil
  return parent.type(self, name, tensorCache)
end

function PCAColorTransform:__tostring__()
  return ('%s channels: %d, std: %f'):format(torch.type(self), self.inputChannels, self.std)
end
