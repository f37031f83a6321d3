-- Dense matching of two C x H x W feature maps: output[y][x][dy][dx] is the squared distance
-- between input[1]'s vector at (y, x) and input[2]'s at (y + dy - 1, x + dx - 1), for a
-- maxh x maxw window. input[2] must then be (H + maxh - 1) x (W + maxw - 1). With full_output,
-- both maps have the same size and the window is centred: offsets -ceil(maxh/2)+1 ..
-- floor(maxh/2) (likewise in x), and positions whose match falls outside hold 1e30.
local SpatialMatching, parent = torch.class('nn.SpatialMatching', 'nn.Module')

local unmatched = 1e30

function SpatialMatching:__init(maxh, maxw, full_output)
  parent.__init(self)
  self.maxh, self.maxw = maxh or 11, maxw or 11
  self.full_output = full_output or false
  self.gradInput1 = torch.Tensor()
  self.gradInput2 = torch.Tensor()
  self._diff = torch.Tensor()
  self._dist = torch.Tensor()
end

function SpatialMatching:_check(input)
  local a, b = input[1], input[2]
  local C, H, W = a:size(1), a:size(2), a:size(3)
  local needH, needW = H, W
  if not self.full_output then needH, needW = H + self.maxh - 1, W + self.maxw - 1 end
  if a:dim() ~= 3 or b:dim() ~= 3 or b:size(1) ~= C or b:size(2) < needH or b:size(3) < needW then
    error(('%s: expected two C x H x W maps, the second at least C x %d x %d, got [%s] and [%s]')
      :format(torch.type(self), needH, needW, table.concat(a:size():totable(), 'x'), table.concat(b:size():totable(), 'x')), 3)
  end
  return H, W
end

-- Calls visit(dy, dx, y0, x0, h, w, oy, ox) for each window offset: rows y0..y0+h-1 and columns
-- x0..x0+w-1 of input[1] (1-based) match input[2] shifted by (oy, ox).
function SpatialMatching:_offsets(H, W, visit)
  local baseH, baseW = 0, 0
  if self.full_output then baseH, baseW = math.ceil(self.maxh / 2) - 1, math.ceil(self.maxw / 2) - 1 end
  for dy = 1, self.maxh do
    for dx = 1, self.maxw do
      local oy, ox = dy - 1 - baseH, dx - 1 - baseW
      local y0, x0 = 1, 1
      local h, w = H, W
      if self.full_output then
        y0, x0 = math.max(1, 1 - oy), math.max(1, 1 - ox)
        h, w = math.min(H, H - oy) - y0 + 1, math.min(W, W - ox) - x0 + 1
      end
      if h > 0 and w > 0 then visit(dy, dx, y0, x0, h, w, oy, ox) end
    end
  end
end

local function region(t, y0, x0, h, w)
  return t:narrow(t:dim() - 1, y0, h):narrow(t:dim(), x0, w)
end

-- input[1]'s region minus input[2]'s shifted region, in self._diff.
function SpatialMatching:_difference(input, y0, x0, h, w, oy, ox)
  local a = region(input[1], y0, x0, h, w)
  return self._diff:resizeAs(a):copy(a):add(-1, region(input[2], y0 + oy, x0 + ox, h, w))
end

function SpatialMatching:updateOutput(input)
  local H, W = self:_check(input)
  self.output:resize(H, W, self.maxh, self.maxw):fill(unmatched)
  self:_offsets(H, W, function(dy, dx, y0, x0, h, w, oy, ox)
    local diff = self:_difference(input, y0, x0, h, w, oy, ox)
    self._dist:sum(diff:cmul(diff), 1)
    local out = self.output:select(4, dx):select(3, dy)
    region(out, y0, x0, h, w):copy(self._dist[1])
  end)
  return self.output
end

-- d/da |a - b|^2 = 2 (a - b), and the opposite for b.
function SpatialMatching:updateGradInput(input, gradOutput)
  local H, W = self:_check(input)
  self.gradInput1:resizeAs(input[1]):zero()
  self.gradInput2:resizeAs(input[2]):zero()
  self:_offsets(H, W, function(dy, dx, y0, x0, h, w, oy, ox)
    local g = region(gradOutput:select(4, dx):select(3, dy), y0, x0, h, w)
    local diff = self:_difference(input, y0, x0, h, w, oy, ox)
    diff:mul(2):cmul(g:contiguous():view(1, h, w):expandAs(diff))
    region(self.gradInput1, y0, x0, h, w):add(diff)
    region(self.gradInput2, y0 + oy, x0 + ox, h, w):add(-1, diff)
  end)
  self.gradInput = {self.gradInput1, self.gradInput2}
  return self.gradInput
end
