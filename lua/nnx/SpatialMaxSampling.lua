-- Max pooling of a C x H x W image to a fixed oheight x owidth: output cell (i, j) (0-based) is
-- the max over rows floor(i*H/oH) .. max(that+1, floor((i+1)*H/oH)) - 1, and likewise for
-- columns. indices (2 x C x oH x oW) holds the 1-based row and column of each max in its window.
local SpatialMaxSampling, parent = torch.class('nn.SpatialMaxSampling', 'nn.Module')

function SpatialMaxSampling:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialMaxSampling', 'resample an image using max selection',
    {arg = 'owidth', type = 'number', help = 'output width', req = true},
    {arg = 'oheight', type = 'number', help = 'output height', req = true})
  self.indices = torch.Tensor()
  self._values = torch.Tensor()
  self._positions = torch.LongTensor()
end

-- The 0-based start and the length of output cell c's window over n inputs split into o cells.
local function window(c, n, o)
  local step = n / o
  local first = math.floor(c * step)
  return first, math.max(first + 1, math.floor((c + 1) * step)) - first
end

function SpatialMaxSampling:updateOutput(input)
  if input:dim() ~= 3 then
    error(('nn.SpatialMaxSampling: 3D tensor expected, got size [%s]')
      :format(table.concat(input:size():totable(), 'x')), 2)
  end
  local C, H, W, oH, oW = input:size(1), input:size(2), input:size(3), self.oheight, self.owidth
  self.output:resize(C, oH, oW)
  self.indices:resize(2, C, oH, oW)
  for i = 0, oH - 1 do
    local y0, h = window(i, H, oH)
    for j = 0, oW - 1 do
      local x0, w = window(j, W, oW)
      local cell = input:narrow(2, y0 + 1, h):narrow(3, x0 + 1, w):reshape(C, h * w)
      self._values:max(self._positions, cell, 2)
      self.output:select(3, j + 1):select(2, i + 1):copy(self._values)
      for k = 1, C do
        local p = self._positions[k][1] - 1
        self.indices[1][k][i + 1][j + 1] = math.floor(p / w) + 1
        self.indices[2][k][i + 1][j + 1] = p % w + 1
      end
    end
  end
  return self.output
end

function SpatialMaxSampling:updateGradInput(input, gradOutput)
  local C, H, W, oH, oW = input:size(1), input:size(2), input:size(3), self.oheight, self.owidth
  self.gradInput:resizeAs(input):zero()
  for i = 0, oH - 1 do
    local y0 = window(i, H, oH)
    for j = 0, oW - 1 do
      local x0 = window(j, W, oW)
      for k = 1, C do
        local y = y0 + self.indices[1][k][i + 1][j + 1]
        local x = x0 + self.indices[2][k][i + 1][j + 1]
        self.gradInput[k][y][x] = self.gradInput[k][y][x] + gradOutput[k][i + 1][j + 1]
      end
    end
  end
  return self.gradInput
end
