-- nn.AffineGridGeneratorBHWD(height, width): B x 2 x 3 affine matrices (or one 2 x 3) -> the
-- height x width sampling grid for nn.BilinearSamplerBHWD (B x height x width x 2, (y, x) in
-- normalized coordinates): each output pixel's normalized (y, x, 1) times the matrix's transpose.
local AGG, parent = torch.class('nn.AffineGridGeneratorBHWD', 'nn.Module')

function AGG:__init(height, width)
  parent.__init(self)
  if type(height) ~= 'number' or type(width) ~= 'number' or height <= 1 or width <= 1 then
    error('nn.AffineGridGeneratorBHWD: height and width must be numbers above 1', 2)
  end
  self.height, self.width = height, width
  -- (y, x, 1) of every output pixel, y and x from -1 to 1
  self.baseGrid = torch.Tensor(height, width, 3)
  local ys = torch.range(0, height - 1):mul(2 / (height - 1)):add(-1)
  local xs = torch.range(0, width - 1):mul(2 / (width - 1)):add(-1)
  self.baseGrid:select(3, 1):copy(ys:view(height, 1):expand(height, width))
  self.baseGrid:select(3, 2):copy(xs:view(1, width):expand(height, width))
  self.baseGrid:select(3, 3):fill(1)
end

local function matrices(self, m)
  local single = m:dim() == 2
  if single then m = m:view(1, m:size(1), m:size(2)) end
  if m:dim() ~= 3 or m:size(2) ~= 2 or m:size(3) ~= 3 then
    error(('nn.AffineGridGeneratorBHWD: please input affine transform matrices (bx2x3), got size %s'):format(
      table.concat(m:size():totable(), 'x')), 3)
  end
  return m, single
end

function AGG:updateOutput(input)
  local m, single = matrices(self, input)
  local B, n = m:size(1), self.height * self.width
  local base = self.baseGrid:typeAs(m):view(1, n, 3):expand(B, n, 3)
  self.output = torch.bmm(base:contiguous(), m:transpose(2, 3)):view(B, self.height, self.width, 2)
  if single then self.output = self.output[1] end
  return self.output
end

function AGG:updateGradInput(input, gradOutput)
  local m, single = matrices(self, input)
  local B, n = m:size(1), self.height * self.width
  local g = gradOutput:contiguous():view(B, n, 2)
  local base = self.baseGrid:typeAs(m):view(1, n, 3):expand(B, n, 3):contiguous()
  self.gradInput = torch.bmm(g:transpose(2, 3), base)
  if single then self.gradInput = self.gradInput[1] end
  return self.gradInput
end
