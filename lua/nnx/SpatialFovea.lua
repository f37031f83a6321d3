-- A multi-scale "fovea": scale i of a C x H x W image is downsampled by ratios[i] (block average,
-- or bilinear), optionally preprocessed, padded by fov - sub and processed by processors[i];
-- the results, upsampled back by ratios[i] (nearest, or bilinear), are stacked along dim 1.
-- focus(x, y[, fov]) switches to training on one location: each scale then processes only the
-- fov x fov window of its padded map under (x, y), and nothing is upsampled; focus() goes back
-- to the global mode. (nnx's cachePrePreproc option is accepted and ignored.)
local SpatialFovea, parent = torch.class('nn.SpatialFovea', 'nn.Module')

function SpatialFovea:__init(...)
  parent.__init(self)
  xlua.unpack_class(self, {...}, 'nn.SpatialFovea', 'a multi-scale fovea',
    {arg = 'nInputPlane', type = 'number', help = 'number of input planes', req = true},
    {arg = 'ratios', type = 'table', help = 'list of downsampling ratios', req = true},
    {arg = 'processors', type = 'table', help = 'one processor per scale', req = true},
    {arg = 'preProcessors', type = 'table', help = 'preprocessors, applied before padding'},
    {arg = 'fov', type = 'number', help = "field of view (the processors' receptive field)", default = 1},
    {arg = 'sub', type = 'number', help = "global subsampling (the processors' stride)", default = 1},
    {arg = 'bilinear', type = 'boolean', help = 'bilinear resampling', default = false},
    {arg = 'cachePrePreproc', type = 'boolean', help = 'ignored', default = false})
  if #self.processors ~= #self.ratios then
    error(('nn.SpatialFovea: %d processors for %d ratios (scales)'):format(#self.processors, #self.ratios), 2)
  end
  self.preProcessors = self.preProcessors or {}
  self.padding = self.fov - self.sub
  self.modules = self.processors
  self.downsamplers, self.padders, self.upsamplers = {}, {}, {}
  local pad = math.floor(self.padding / 2)
  for i, r in ipairs(self.ratios) do
    if self.bilinear then
      self.downsamplers[i] = nn.SpatialReSampling{rwidth = 1 / r, rheight = 1 / r}
      self.upsamplers[i] = nn.SpatialReSampling{rwidth = r, rheight = r}
    else
      local average = nn.SpatialSubSampling(self.nInputPlane, r, r, r, r)
      average.weight:fill(1 / (r * r))
      average.bias:zero()
      self.downsamplers[i] = average
      self.upsamplers[i] = nn.SpatialUpSampling(r, r)
    end
    self.padders[i] = pad == 0 and nn.Identity() or nn.SpatialPadding(pad, pad, pad, pad)
  end
  self.pyramid, self.preProcessed, self.padded, self.narrowed, self.processed = {}, {}, {}, {}, {}
  self.gradProcessed, self._gradPadded = {}, {}
end

function SpatialFovea:focus(x, y, fov)
  self.x, self.y = x, y
  self.fov = fov or self.fov
  self.focused = (x and y and self.fov) and true or false
end

-- The top-left corner (x, y) of scale i's focus window in its padded map.
function SpatialFovea:_corner(i)
  local function at(v) return math.floor(math.floor((v - 1) / self.ratios[i]) / self.sub) * self.sub + 1 end
  return at(self.x), at(self.y)
end

function SpatialFovea:_window(t, i)
  local ox, oy = self:_corner(i)
  return t:narrow(3, ox, self.fov):narrow(2, oy, self.fov)
end

function SpatialFovea:updateOutput(input)
  if input:dim() ~= 3 or input:size(1) ~= self.nInputPlane then
    error(('nn.SpatialFovea: input must be %d x H x W, got size [%s]')
      :format(self.nInputPlane, table.concat(input:size():totable(), 'x')), 2)
  end
  local results, planes = {}, 0
  for i = 1, #self.ratios do
    self.pyramid[i] = self.downsamplers[i]:updateOutput(input)
    local pre = self.preProcessors[i]
    self.preProcessed[i] = pre and pre:updateOutput(self.pyramid[i]) or self.pyramid[i]
    self.padded[i] = self.padders[i]:updateOutput(self.preProcessed[i])
    self.narrowed[i] = self.focused and self:_window(self.padded[i], i) or self.padded[i]
    self.processed[i] = self.processors[i]:updateOutput(self.narrowed[i])
    results[i] = self.focused and self.processed[i] or self.upsamplers[i]:updateOutput(self.processed[i])
    planes = planes + results[i]:size(1)
  end
  self.output:resize(planes, results[1]:size(2), results[1]:size(3))
  local first = 1
  for i, r in ipairs(results) do
    if r:size(2) ~= results[1]:size(2) or r:size(3) ~= results[1]:size(3) then
      error(('nn.SpatialFovea: the processors must shrink their input by fov - sub = %d pixels (scale %d, '
        .. 'ratio %s, gives %dx%d maps, scale 1 gives %dx%d)'):format(self.padding, i, tostring(self.ratios[i]),
        r:size(2), r:size(3), results[1]:size(2), results[1]:size(3)), 2)
    end
    self.output:narrow(1, first, r:size(1)):copy(r)
    first = first + r:size(1)
  end
  return self.output
end

function SpatialFovea:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(input):zero()
  local first = 1
  for i = 1, #self.ratios do
    local n = self.processed[i]:size(1)
    local g = gradOutput:narrow(1, first, n)
    first = first + n
    self.gradProcessed[i] = self.focused and g or self.upsamplers[i]:updateGradInput(self.processed[i], g)
    local gradNarrowed = self.processors[i]:updateGradInput(self.narrowed[i], self.gradProcessed[i])
    local gradPadded = gradNarrowed
    if self.focused then
      self._gradPadded[i] = self._gradPadded[i] or self.padded[i].new()
      gradPadded = self._gradPadded[i]:resizeAs(self.padded[i]):zero()
      self:_window(gradPadded, i):copy(gradNarrowed)
    end
    local gradPre = self.padders[i]:updateGradInput(self.preProcessed[i], gradPadded)
    local pre = self.preProcessors[i]
    local gradPyramid = pre and pre:updateGradInput(self.pyramid[i], gradPre) or gradPre
    self.gradInput:add(self.downsamplers[i]:updateGradInput(input, gradPyramid))
  end
  return self.gradInput
end

function SpatialFovea:accGradParameters(input, gradOutput, scale)
  for i, processor in ipairs(self.processors) do
    processor:accGradParameters(self.narrowed[i], self.gradProcessed[i], scale)
  end
end

function SpatialFovea:__tostring__()
  local lines = {'nn.SpatialFovea {', '  input'}
  for i, processor in ipairs(self.processors) do
    local pipeline = nn.Sequential()
    if self.preProcessors[i] then pipeline:add(self.preProcessors[i]) end
    pipeline:add(processor)
    lines[#lines + 1] = ('  |`-> (%d): %s'):format(i, (tostring(pipeline):gsub('\n', '\n  |    ')))
  end
  lines[#lines + 1] = '   ... -> output'
  lines[#lines + 1] = '}'
  return table.concat(lines, '\n')
end
