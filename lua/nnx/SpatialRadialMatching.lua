-- SpatialMatching along y only: output[y][x][d] is the squared distance between input[1]'s
-- vector at (y, x) and input[2]'s at (y + d - 1, x), for d = 1..maxh; input[2] must have
-- maxh - 1 more rows than input[1].
local SpatialRadialMatching, parent = torch.class('nn.SpatialRadialMatching', 'nn.SpatialMatching')

function SpatialRadialMatching:__init(maxh)
  parent.__init(self, maxh, 1, false)
end

function SpatialRadialMatching:updateOutput(input)
  self.output = parent.updateOutput(self, input):select(4, 1)
  return self.output
end

function SpatialRadialMatching:updateGradInput(input, gradOutput)
  local H, W = input[1]:size(2), input[1]:size(3)
  return parent.updateGradInput(self, input, gradOutput:contiguous():view(H, W, self.maxh, 1))
end
