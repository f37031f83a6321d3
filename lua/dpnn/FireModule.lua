-- SqueezeNet's Fire module (arXiv:1602.07360): a 1x1 "squeeze" convolution to s1x1 planes, then
-- 1x1 (e1x1 planes) and 3x3 (e3x3 planes) "expand" convolutions concatenated along the planes,
-- each stage followed by the activation (nn[activation], ReLU by default).
local FireModule, parent = torch.class('nn.FireModule', 'nn.Decorator')

function FireModule:__init(nInputPlane, s1x1, e1x1, e3x3, activation)
  self.nInputPlane, self.s1x1, self.e1x1, self.e3x3 = nInputPlane, s1x1, e1x1, e3x3
  self.activation = activation or 'ReLU'
  if not nn[self.activation] then
    error(('nn.FireModule: unknown activation nn.%s'):format(tostring(self.activation)), 2)
  end
  if s1x1 > e1x1 + e3x3 then
    print('Warning: <FireModule> s1x1 is recommended to be smaller then e1x1+e3x3')
  end
  self.squeeze = nn.SpatialConvolution(nInputPlane, s1x1, 1, 1)
  self.expand = nn.Concat(2)
    :add(nn.SpatialConvolution(s1x1, e1x1, 1, 1))
    :add(nn.SpatialConvolution(s1x1, e3x3, 3, 3, 1, 1, 1, 1))
  self.module = nn.Sequential()
    :add(self.squeeze):add(nn[self.activation]())
    :add(self.expand):add(nn[self.activation]())
  parent.__init(self, self.module)
end

function FireModule:__tostring__()
  return ('%s inputPlanes: %d -> Squeeze Planes: %d -> Expand: %d(1x1) + %d(3x3), activation: %s'):format(
    torch.type(self), self.nInputPlane, self.s1x1, self.e1x1, self.e3x3, self.activation)
end
