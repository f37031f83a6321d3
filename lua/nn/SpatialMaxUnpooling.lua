-- The inverse of a SpatialMaxPooling module (kernel size = stride): each input value goes back
-- where the pooling found its maximum (the pooling's indices), the rest of the output is zero.
local pool = require 'nn.util.pool'
local shape = require 'nn.util.shape'
local SpatialMaxUnpooling, parent = torch.class('nn.SpatialMaxUnpooling', 'nn.Module')

SpatialMaxUnpooling._pooling, SpatialMaxUnpooling._dims = 'nn.SpatialMaxPooling', { 'H', 'W' }
local inputSize = { T = 'itime', H = 'iheight', W = 'iwidth' }
local outputSize = { T = 'otime', H = 'oheight', W = 'owidth' }

function SpatialMaxUnpooling:__init(poolingModule)
  parent.__init(self)
  if torch.type(poolingModule) ~= self._pooling then
    shape.fail(self, 'the argument must be a %s module, got %s', self._pooling, torch.type(poolingModule))
  end
  local k, d = {}, {}
  for i, dim in ipairs(self._dims) do k[i], d[i] = poolingModule['k' .. dim], poolingModule['d' .. dim] end
  if table.concat(k, ',') ~= table.concat(d, ',') then
    shape.fail(self, "the pooling module's kernel (%s) must equal its stride (%s)",
      table.concat(k, 'x'), table.concat(d, ','))
  end
  self.pooling = poolingModule
end

-- Checks input against the pooling's last output; returns the plane count, the elements of an
-- input and an output plane, and the output sizes.
function SpatialMaxUnpooling:_geometry(input)
  local p, dims = self.pooling, self._dims
  local batch, B, C, s = shape.input(self, input, #dims)
  local ix = p.indices
  if not p.iheight or not ix or not input:isSameSizeAs(ix) then
    shape.fail(self, 'input of size %s does not match the indices of %s (size %s): run the pooling first',
      table.concat(input:size():totable(), 'x'), tostring(p), ix and table.concat(ix:size():totable(), 'x') or 'none')
  end
  local sizes, n, m = { C }, 1, 1
  for i, dim in ipairs(dims) do
    self[outputSize[dim]] = p[inputSize[dim]]
    sizes[i + 1] = p[inputSize[dim]]
    n, m = n * s[i], m * sizes[i + 1]
  end
  if batch then table.insert(sizes, 1, B) end
  return B * C, n, m, sizes
end

function SpatialMaxUnpooling:updateOutput(input)
  local P, n, m, sizes = self:_geometry(input)
  self.output:resize(sizes)
  pool.unpool(input:contiguous(), self.output, self.pooling.indices, P, n, m, false)
  return self.output
end

function SpatialMaxUnpooling:updateGradInput(input, gradOutput)
  local P, n, m, sizes = self:_geometry(input)
  shape.gradOutput(self, gradOutput, sizes)
  self.gradInput:resizeAs(input)
  pool.unpool(self.gradInput, gradOutput:contiguous(), self.pooling.indices, P, n, m, true)
  return self.gradInput
end

function SpatialMaxUnpooling:__tostring__()
  return torch.type(self) .. ' associated to ' .. tostring(self.pooling)
end
