-- Edge weights of the 4-connected pixel graph of a C x H x W feature map: output[1][y][x] weighs
-- the edge from (y, x) to (y, x+1), output[2][y][x] the edge to (y+1, x) (0 past the last
-- column/row).
--   dist = 'euclid': the Euclidean distance between the two feature vectors, divided by sqrt(C)
--                    when normalize (then features in [0, 1] give weights in [0, 1]);
--   dist = 'cosine': C - <a, b> on features shifted by 1e-12 (nnx's unnormalised form; the
--                    normalised one is refused, as in nnx).
local SpatialGraph, parent = torch.class('nn.SpatialGraph', 'nn.Module')

local shift = 1e-12

function SpatialGraph:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialGraph', 'edge-weighted graph of a feature map',
    {arg = 'dist', type = 'string', help = 'euclid | cosine', default = 'euclid'},
    {arg = 'normalize', type = 'boolean', help = 'divide euclidean distances by sqrt(#features)', default = true},
    {arg = 'connex', type = 'number', help = 'connexity (4 only)', default = 4})
  if self.connex ~= 4 then error('nn.SpatialGraph: 4 is the only connexity supported', 2) end
  if self.dist ~= 'euclid' and self.dist ~= 'cosine' then
    error(('nn.SpatialGraph: dist must be euclid or cosine, got %s'):format(tostring(self.dist)), 2)
  end
  if self.dist == 'cosine' and self.normalize then
    error('nn.SpatialGraph: normalized cosine is not supported (give normalize = false)', 2)
  end
  self._diff = torch.Tensor()
  self._sum = torch.Tensor()
  self._coef = torch.Tensor()
  self._shift = torch.Tensor()
end

-- t + 1e-12, in a reused buffer.
function SpatialGraph:_shifted(t)
  return self._shift:resizeAs(t):copy(t):add(shift)
end

-- The two neighbour pairs of t (C x H x W): for each direction, the views of the first and
-- second pixel of every edge, and the output plane index.
local function edges(t)
  local H, W = t:size(2), t:size(3)
  local list = {}
  if W > 1 then
    list[#list + 1] = {t:narrow(3, 1, W - 1), t:narrow(3, 2, W - 1), 1, 3, W - 1}
  end
  if H > 1 then
    list[#list + 1] = {t:narrow(2, 1, H - 1), t:narrow(2, 2, H - 1), 2, 2, H - 1}
  end
  return list
end

function SpatialGraph:updateOutput(input)
  if input:dim() ~= 3 then
    error(('nn.SpatialGraph: expected a C x H x W input, got size [%s]')
      :format(table.concat(input:size():totable(), 'x')), 2)
  end
  local C = input:size(1)
  self.output:resize(2, input:size(2), input:size(3)):zero()
  for _, e in ipairs(edges(input)) do
    local a, b, plane, dim, n = e[1], e[2], e[3], e[4], e[5]
    local out = self.output[plane]:narrow(dim - 1, 1, n)
    if self.dist == 'euclid' then
      self._diff:resizeAs(a):copy(a):add(-1, b)
      self._sum:sum(self._diff:cmul(self._diff), 1)
      out:copy(self._sum[1]):sqrt():div(self.normalize and math.sqrt(C) or 1)
    else
      self._diff:resizeAs(a):copy(a):add(shift):cmul(self:_shifted(b))
      self._sum:sum(self._diff, 1)
      out:copy(self._sum[1]):mul(-1):add(C)
    end
  end
  return self.output
end

function SpatialGraph:updateGradInput(input, gradOutput)
  local C = input:size(1)
  self.gradInput:resizeAs(input):zero()
  local gradEdges = edges(self.gradInput)
  for i, e in ipairs(edges(input)) do
    local a, b, plane, dim, n = e[1], e[2], e[3], e[4], e[5]
    local ga, gb = gradEdges[i][1], gradEdges[i][2]
    local g = gradOutput[plane]:narrow(dim - 1, 1, n)
    if self.dist == 'euclid' then
      -- out = k |a-b| (k = 1/sqrt(C) or 1): d out/da = k (a-b)/|a-b| = k^2 (a-b)/out, 0 where a = b
      local out = self.output[plane]:narrow(dim - 1, 1, n)
      self._coef:resizeAs(g):copy(g):cdiv(out):mul(self.normalize and 1 / C or 1)
      self._coef[out:eq(0)] = 0
      self._diff:resizeAs(a):copy(a):add(-1, b):cmul(self._coef:view(1, g:size(1), g:size(2)):expandAs(a))
      ga:add(self._diff)
      gb:add(-1, self._diff)
    else
      local gv = g:contiguous():view(1, g:size(1), g:size(2)):expandAs(a)
      ga:add(-1, self:_shifted(b):cmul(gv))
      gb:add(-1, self:_shifted(a):cmul(gv))
    end
  end
  return self.gradInput
end
