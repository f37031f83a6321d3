-- nn.LinearNoBias(inputSize, outputSize): y = W x, nn.Linear without its bias.
local LinearNoBias, parent = torch.class('nn.LinearNoBias', 'nn.Linear')

function LinearNoBias:__init(inputSize, outputSize)
  parent.__init(self, inputSize, outputSize, false)
end
