-- Pads (or, with negative amounts, crops) the (y_dim, x_dim) pair of an input by pad_l, pad_r,
-- pad_t, pad_b pixels filled with val (default 0).
local SpatialPadding, parent = torch.class('nn.SpatialPadding', 'nn.Module')

function SpatialPadding:__init(pad_l, pad_r, pad_t, pad_b, y_dim, x_dim, val)
  parent.__init(self)
  if type(pad_l) ~= 'number' then
    error('nn.SpatialPadding(pad_l [, pad_r, pad_t, pad_b, y_dim=2, x_dim=3, val=0]): pad_l must be a number', 2)
  end
  self.pad_l = pad_l
  self.pad_r, self.pad_t, self.pad_b = pad_r or pad_l, pad_t or pad_l, pad_b or pad_l
  self.y_dim, self.x_dim = y_dim or 2, x_dim or 3
  if self.x_dim % 1 ~= 0 then error('nn.SpatialPadding: x_dim must be integer', 2) end
  if self.y_dim % 1 ~= 0 then error('nn.SpatialPadding: y_dim must be integer', 2) end
  self.val = val or 0
end

-- One dim of the copy: the ranges (start, length) of input and output it covers.
local function span(n, before, after)
  local inStart, outStart = 1 + math.max(0, -before), 1 + math.max(0, before)
  return inStart, outStart, n - math.max(0, -before) - math.max(0, -after)
end

-- The regions of the input and of the padded output that hold the same pixels.
function SpatialPadding:_regions(input, output)
  local dy, dx = self.y_dim, self.x_dim
  local iy, oy, h = span(input:size(dy), self.pad_t, self.pad_b)
  local ix, ox, w = span(input:size(dx), self.pad_l, self.pad_r)
  if h < 1 or w < 1 then return nil end
  return input:narrow(dy, iy, h):narrow(dx, ix, w), output:narrow(dy, oy, h):narrow(dx, ox, w)
end

function SpatialPadding:updateOutput(input)
  local dy, dx = self.y_dim, self.x_dim
  if input:dim() < math.max(dy, dx) then
    error(('nn.SpatialPadding: input of size [%s] has no dims %d and %d')
      :format(table.concat(input:size():totable(), 'x'), dy, dx), 2)
  end
  local h = input:size(dy) + self.pad_t + self.pad_b
  local w = input:size(dx) + self.pad_l + self.pad_r
  if w < 1 or h < 1 then
    error(('nn.SpatialPadding: input of size [%s] is too small for the paddings')
      :format(table.concat(input:size():totable(), 'x')), 2)
  end
  if self.output:type() ~= input:type() then self.output = input.new() end
  local size = input:size()
  size[dy], size[dx] = h, w
  self.output:resize(size):fill(self.val)
  local from, to = self:_regions(input, self.output)
  if from then to:copy(from) end
  return self.output
end

function SpatialPadding:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(input):zero()
  local to, from = self:_regions(self.gradInput, gradOutput)
  if to then to:copy(from) end
  return self.gradInput
end
