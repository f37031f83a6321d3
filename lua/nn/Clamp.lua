-- x clipped to [min, max] (a HardTanh with given bounds).
local Clamp, parent = torch.class('nn.Clamp', 'nn.HardTanh')

function Clamp:__init(minValue, maxValue)
  parent.__init(self, minValue, maxValue)
end
