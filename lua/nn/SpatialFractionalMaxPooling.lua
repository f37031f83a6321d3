-- Fractional max pooling (Graham 2014) of planes x H x W (or batch x planes x H x W) inputs:
-- poolSizeW x poolSizeH windows at pseudo-random places giving outW x outH outputs, or
-- floor(ratio * input size) outputs when given ratios in (0, 1). Each plane draws its own
-- samples on each forward unless fixPoolingRegions() holds them.
-- VolumetricFractionalMaxPooling derives from this class; the pooled dimensions are listed in
-- `dims` (in input order), `sampleOf` giving each one's slot in a plane's random samples.
local check = require 'torch.core.check'
local backend = require 'torch.backend'   -- fractional_max_forward / _backward (nn_fractional)
local Pooling, parent = torch.class('nn.SpatialFractionalMaxPooling', 'nn.Module')

Pooling.dims = { 'H', 'W' }
Pooling.sampleOf = { 2, 1 }

function Pooling:__init(poolSizeW, poolSizeH, arg1, arg2)
  parent.__init(self)
  self:_setup({ H = poolSizeH, W = poolSizeW }, { H = arg2, W = arg1 })
end

-- pool: pool size by dimension name; arg: output size (>= 1) or reduction ratio by name.
function Pooling:_setup(pool, arg)
  local name = torch.type(self)
  local sizes = true
  for _, d in ipairs(self.dims) do
    if type(pool[d]) ~= 'number' or pool[d] < 2 then
      check.error(('%s: poolSize%s must be at least 2, got %s'):format(name, d, tostring(pool[d])))
    end
    if type(arg[d]) ~= 'number' or arg[d] <= 0 then
      check.error(('%s: output size or ratio %s must be positive, got %s'):format(name, d, tostring(arg[d])))
    end
    self['poolSize' .. d] = pool[d]
    sizes = sizes and arg[d] >= 1
  end
  for _, d in ipairs(self.dims) do
    if sizes then self['out' .. d] = arg[d]
    elseif arg[d] >= 1 then
      check.error(('%s: ratio%s must lie in (0, 1), got %g'):format(name, d, arg[d]))
    else self['ratio' .. d] = arg[d] end
  end
  self.newRandomPool = false
end

-- Hold the pooling regions (true by default) or draw new ones on every forward (false).
function Pooling:fixPoolingRegions(val)
  if val == nil then val = true end
  self.newRandomPool = val
  return self
end

-- Returns batch size, planes, and per pooled dimension the input and output sizes.
function Pooling:_geometry(input)
  local name, n = torch.type(self), #self.dims
  local nd = torch.isTensor(input) and input:dim() or 0
  if nd ~= n + 1 and nd ~= n + 2 then
    check.error(('%s: expected %dD or %dD (batch mode) input, got %s'):format(name, n + 1, n + 2,
      torch.isTensor(input) and check.sizestr(input) or torch.type(input)))
  end
  local first = nd - n + 1
  local inSize, outSize = {}, {}
  for i, d in ipairs(self.dims) do
    inSize[i] = input:size(first + i - 1)
    outSize[i] = self['out' .. d] or math.floor(inSize[i] * self['ratio' .. d])
    if outSize[i] < 1 then
      check.error(('%s: reduction ratio or input %s too small (input %s)'):format(name, d, check.sizestr(input)))
    end
    if outSize[i] + self['poolSize' .. d] - 1 >= inSize[i] then
      check.error(('%s: poolSize%s (%d) too large relative to input size %d for %d outputs (input %s)'):format(
        name, d, self['poolSize' .. d], inSize[i], outSize[i], check.sizestr(input)))
    end
  end
  return nd == n + 2 and input:size(1) or 1, input:size(first - 1), inSize, outSize
end

-- One uniform sample per plane and pooled dimension; redrawn per forward unless fixed (a
-- fresh buffer is always drawn).
function Pooling:_samples(input, batch, planes)
  local n = #self.dims
  local s = self.randomSamples
  if s == nil or s:size(1) ~= batch or s:size(2) ~= planes or s:type() ~= input:type() then
    self.randomSamples = input.new(batch, planes, n):uniform()
  elseif not self.newRandomPool then
    s:uniform()
  end
  return self.randomSamples
end

-- The P x A x B x C shape the kernel pools over (A = 1 for two pooled dimensions).
local function cube(sizes)
  if #sizes == 2 then return { 1, sizes[1], sizes[2] } end
  return sizes
end

function Pooling:updateOutput(input)
  local batch, planes, inSize, outSize = self:_geometry(input)
  local samples = self:_samples(input, batch, planes):view(batch * planes, #self.dims)
  local P, inC, outC = batch * planes, cube(inSize), cube(outSize)
  local pool = {}
  for i, d in ipairs(self.dims) do pool[i] = self['poolSize' .. d] end
  local slots = {}
  for i = 1, #self.dims do slots[i] = self.sampleOf[i] end
  if #self.dims == 2 then pool, slots = { 1, pool[1], pool[2] }, { 0, slots[1], slots[2] } end
  local x = input:contiguous():view(P, inC[1], inC[2], inC[3])
  self.indices = self.indices or torch.LongTensor()
  self.indices:resize(P, outC[1], outC[2], outC[3])
  self.output:resize(P, outC[1], outC[2], outC[3])
  backend.of(x).fractional_max_forward(x, self.output, self.indices, samples, slots, outC, pool)
  local shape = input:size()
  for i = 1, #self.dims do shape[input:dim() - #self.dims + i] = outSize[i] end
  self.output = self.output:view(shape)
  self.indices = self.indices:view(shape)
  return self.output
end

function Pooling:updateGradInput(input, gradOutput)
  if not self.indices or self.indices:nElement() == 0 then
    check.error(torch.type(self) .. ': call updateOutput/forward before updateGradInput')
  end
  if not torch.isTensor(gradOutput) or not gradOutput:isSameSizeAs(self.indices) then
    check.error(('%s: gradOutput size %s does not match output size %s'):format(torch.type(self),
      torch.isTensor(gradOutput) and check.sizestr(gradOutput) or torch.type(gradOutput),
      check.sizestr(self.indices)))
  end
  local batch, planes = self:_geometry(input)
  self.gradInput:resize(input:size()):zero()
  backend.of(self.gradInput).fractional_max_backward(self.gradInput:view(batch * planes, -1), gradOutput:contiguous(), self.indices)
  return self.gradInput
end

function Pooling:empty() return self:clearState() end

function Pooling:clearState()
  self.indices, self.randomSamples = nil, nil
  return parent.clearState(self)
end

function Pooling:__tostring__()
  local outs, pools = {}, {}
  for i = #self.dims, 1, -1 do
    local d = self.dims[i]
    outs[#outs + 1] = tostring(self['out' .. d] or self['ratio' .. d])
    pools[#pools + 1] = tostring(self['poolSize' .. d])
  end
  return ('%s(%s, %s)'):format(torch.type(self), table.concat(outs, 'x'), table.concat(pools, ','))
end
