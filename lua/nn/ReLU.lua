-- max(0, x).
local ReLU, parent = torch.class('nn.ReLU', 'nn.Threshold')

function ReLU:__init(inplace)
  parent.__init(self, 0, 0, inplace)
end
