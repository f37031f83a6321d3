-- Upsamples 4-D (batch x planes x H x W) or 5-D (batch x planes x D x H x W) inputs, by nearest
-- neighbour (an integer scale_factor) or (bi/tri)linear interpolation with aligned corners
-- (mode 'linear', 'bilinear' or 'trilinear'; a scale_factor or a table {odepth=, oheight=, owidth=}).
-- Both modes are separable: each spatial axis is multiplied by a fixed out x in interpolation
-- matrix, so forward and backward are a few matrix products (backward uses the transposes).
local UpSampling, parent = torch.class('nn.UpSampling', 'nn.Module')

local LINEAR = { linear = true, bilinear = true, trilinear = true }

function UpSampling:__init(params, mode)
  parent.__init(self)
  self.mode = LINEAR[mode] and 'linear' or 'nearest'
  if torch.type(params) == 'table' then
    if self.mode == 'nearest' then error('nn.UpSampling: nearest neighbour upsampling requires a scale_factor') end
    self.odepth, self.owidth, self.oheight = params.odepth, params.owidth, params.oheight
    if not (self.owidth and self.oheight) then error('nn.UpSampling: output height and width parameters are required') end
  else
    self.scale_factor = params
    if type(params) ~= 'number' or params < 1 then error('nn.UpSampling: scale_factor must be at least 1') end
    if math.floor(params) ~= params then error('nn.UpSampling: scale_factor must be integer') end
  end
end

-- Output length of spatial axis k (1 = depth, 2 = height, 3 = width) for input length n.
function UpSampling:_outLength(k, n)
  if self.scale_factor then return n * self.scale_factor end
  local out = ({ self.odepth, self.oheight, self.owidth })[k]
  if not out then error('nn.UpSampling: no output depth was supplied for volumetric upsampling') end
  return out
end

-- The out x in matrix of one axis: nearest copies input floor(o / scale); linear mixes the two
-- inputs around o * (n - 1) / (out - 1) (0-based), corners aligned. Built by whole-tensor
-- steps (scatter), not a loop per output row: a large scale must fail on memory, not spin.
function UpSampling:_matrix(template, n, out)
  if out == 0 or n == 0 then return template.new(out, n) end
  local o = torch.range(0, out - 1)   -- first: the largest buffer, as doubles
  local m = template.new(out, n):zero()
  if self.mode == 'nearest' then
    return m:scatter(2, o:div(self.scale_factor):floor():long():add(1):view(out, 1), 1)
  end
  local src = out > 1 and o:mul(n - 1):div(out - 1) or o:zero()
  local i0 = src:clone():floor()
  local w = src:add(-1, i0)
  -- i0 < n - 1 everywhere but at the last corner, where w is 0 and i1 = i0
  local i1 = i0:clone():add(1):clamp(0, n - 1)
  m:scatter(2, i1:long():add(1):view(out, 1), w:view(out, 1):typeAs(m))
  return m:scatter(2, i0:long():add(1):view(out, 1), w:mul(-1):add(1):view(out, 1):typeAs(m))
end

-- The interpolation matrices of the spatial axes (rebuilt when the input shape changes).
function UpSampling:_matrices(input)
  local nd = input:dim()
  if nd ~= 4 and nd ~= 5 then
    error(string.format('nn.UpSampling: expected a 4D or 5D input, got %dD', nd))
  end
  local key = table.concat(input:size():totable(), 'x') .. torch.type(input)
  if self._key ~= key then
    self._mats = {}
    for d = 3, nd do
      local k = d - nd + 3
      self._mats[d] = self:_matrix(input, input:size(d), self:_outLength(k, input:size(d)))
    end
    self._key = key
  end
  return self._mats
end

-- x with axis `dim` multiplied by m (rows: new length, columns: x's length on that axis).
local function applyAxis(x, dim, m)
  local nd = x:dim()
  local moved = x:transpose(dim, nd):contiguous()
  local size = moved:size()
  local flat = torch.mm(moved:view(-1, m:size(2)), m:t())
  size[nd] = m:size(1)
  return flat:view(size):transpose(dim, nd)
end

function UpSampling:updateOutput(input)
  local y, mats = input, self:_matrices(input)
  for d = 3, input:dim() do y = applyAxis(y, d, mats[d]) end   -- in order: same rounding every time
  self.output:resize(y:size()):copy(y)
  return self.output
end

function UpSampling:updateGradInput(input, gradOutput)
  local mats = self:_matrices(input)
  local expected = input:size()
  for d = 3, input:dim() do expected[d] = mats[d]:size(1) end
  if not gradOutput:isSize(expected) then
    error(string.format('nn.UpSampling: gradOutput should be %s, got %s',
      table.concat(expected:totable(), 'x'), table.concat(gradOutput:size():totable(), 'x')))
  end
  local g = gradOutput
  for d = 3, input:dim() do g = applyAxis(g, d, mats[d]:t()) end
  self.gradInput:resizeAs(input):copy(g)
  return self.gradInput
end

function UpSampling:clearState()
  self._mats, self._key = nil, nil
  return parent.clearState(self)
end

function UpSampling:__tostring__()
  if self.scale_factor then
    return string.format('%s(%d, %s)', torch.type(self), self.scale_factor, self.mode)
  end
  return string.format('%s(%s)', torch.type(self), self.mode)
end
