-- inn.SpatialPyramidPooling({{w1,h1}, {w2,h2}, ...}) or (w1h1, w2h2, ...) pairs: adaptive max
-- pooling of the input to each grid, each flattened, joined one after the other per sample
-- (a C x H x W input gives a vector, a batch a matrix): SPP-net's layer, a Concat of nn modules.
require 'inn.env'
local SpatialPyramidPooling, parent = torch.class('inn.SpatialPyramidPooling', 'nn.Concat')

function SpatialPyramidPooling:__init(...)
  parent.__init(self, 1)
  local levels = { ... }
  if type(levels[1]) == 'table' and type(levels[1][1]) == 'table' then levels = levels[1] end
  if #levels == 0 then error('inn.SpatialPyramidPooling: give the pyramid\'s grids, e.g. {{1,1},{2,2}}', 2) end
  self.pyr = levels
  for _, grid in ipairs(levels) do
    if type(grid) ~= 'table' or type(grid[1]) ~= 'number' or type(grid[2]) ~= 'number' then
      error('inn.SpatialPyramidPooling: each level is a {width, height} pair', 2)
    end
    parent.add(self, nn.Sequential()
      :add(nn.SpatialAdaptiveMaxPooling(grid[1], grid[2]))
      :add(nn.View(-1):setNumInputDims(3))
      :add(nn.Contiguous()))
  end
end

function SpatialPyramidPooling:updateOutput(input)
  if not torch.isTensor(input) or (input:dim() ~= 3 and input:dim() ~= 4) then
    error('inn.SpatialPyramidPooling: a 3-D (C x H x W) or 4-D (N x C x H x W) input expected, got '
      .. (torch.isTensor(input) and input:dim() .. '-D' or torch.type(input)), 2)
  end
  self.dimension = input:dim() - 2   -- the flattened levels follow one another per sample
  return parent.updateOutput(self, input)
end
