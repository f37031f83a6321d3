-- min(max(0, x), 6).
local ReLU6, parent = torch.class('nn.ReLU6', 'nn.HardTanh')

function ReLU6:__init(inplace)
  parent.__init(self, 0, 6, inplace)
end
