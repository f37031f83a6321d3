-- The inverse of a SpatialMaxPooling module (kernel size = stride): each input value goes back
-- where the pooling found its maximum (the pooling's indices), the rest of the output is zero.
local pool = require 'nn.kernels.pool'
local shape = require 'nn.kernels.shape'
local SpatialMaxUnpooling, parent = torch.class('nn.SpatialMaxUnpooling', 'nn.Module')

function SpatialMaxUnpooling:__init(poolingModule)
  parent.__init(self)
  if torch.type(poolingModule) ~= 'nn.SpatialMaxPooling' then
    shape.fail(self, 'the argument must be a nn.SpatialMaxPooling module, got %s', torch.type(poolingModule))
  end
  if poolingModule.kH ~= poolingModule.dH or poolingModule.kW ~= poolingModule.dW then
    shape.fail(self, "the pooling module's kernel (%dx%d) must equal its stride (%d,%d)",
      poolingModule.kW, poolingModule.kH, poolingModule.dW, poolingModule.dH)
  end
  self.pooling = poolingModule
end

-- Checks input against the pooling's last output; returns the plane count and output sizes.
function SpatialMaxUnpooling:_geometry(input)
  local p = self.pooling
  local batch, B, C, s = shape.input(self, input, 2)
  local ix = p.indices
  if not p.iheight or not ix or not input:isSameSizeAs(ix) then
    shape.fail(self, 'input of size %s does not match the indices of %s (size %s): run the pooling first',
      table.concat(input:size():totable(), 'x'), tostring(p), ix and table.concat(ix:size():totable(), 'x') or 'none')
  end
  self.oheight, self.owidth = p.iheight, p.iwidth
  return B * C, s[1] * s[2], batch and { B, C, p.iheight, p.iwidth } or { C, p.iheight, p.iwidth }
end

function SpatialMaxUnpooling:updateOutput(input)
  local P, n, sizes = self:_geometry(input)
  self.output:resize(sizes)
  pool.unpool(input:contiguous(), self.output, self.pooling.indices, P, n, self.oheight * self.owidth, false)
  return self.output
end

function SpatialMaxUnpooling:updateGradInput(input, gradOutput)
  local P, n, sizes = self:_geometry(input)
  shape.gradOutput(self, gradOutput, sizes)
  self.gradInput:resizeAs(input)
  pool.unpool(self.gradInput, gradOutput:contiguous(), self.pooling.indices, P, n,
    self.oheight * self.owidth, true)
  return self.gradInput
end

function SpatialMaxUnpooling:__tostring__()
  return 'nn.SpatialMaxUnpooling associated to ' .. tostring(self.pooling)
end
