-- nn.Max and nn.Min: the max (min) over a dim, squeezed; the gradient goes to the position
-- that won. Negative dims count from the end; with nInputDims the dim counts after a batch dim.
local check = require 'torch.core.check'
local backend = require 'torch.backend'

local extremum = {}

-- An empty index tensor on t's device (max/min/gather take indices of the data's kind).
function extremum.indexTensor(t)
  return torch.getmetatable(backend.typeName(t, 'Long')).new()
end

-- self[field] as an index tensor on t's device: kept when it already is one, else made anew.
function extremum.indices(self, field, t)
  local wanted = backend.typeName(t, 'Long')
  if torch.type(self[field]) ~= wanted then self[field] = extremum.indexTensor(t) end
  return self[field]
end

function extremum.define(cls, op)
  function cls:__init(dimension, nInputDims)
    nn.Module.__init(self)
    self.dimension = check.int(torch.type(self), dimension or 1, 'dimension', -check.MAXDIM, check.MAXDIM)
    self.nInputDims = check.optInt(torch.type(self), nInputDims, 'nInputDims', 0, check.MAXDIM)
  end

  cls._getPositiveDimension = nn.Sum._getPositiveDimension

  function cls:updateOutput(input)
    local dim = self:_getPositiveDimension(input)
    if input:size(dim) == 0 then
      check.error(('%s: cannot take the %s over empty dimension %d of %s input'):format(
        torch.type(self), op, dim, check.sizestr(input)))
    end
    self._output = self._output or input.new()
    self._indices = self._indices or extremum.indexTensor(input)
    torch[op](self._output, self._indices, input, dim)
    self.output:set(input:dim() > 1 and self._output:select(dim, 1) or self._output)
    return self.output
  end

  function cls:updateGradInput(input, gradOutput)
    local dim = self:_getPositiveDimension(input)
    check.sameElements(torch.type(self), gradOutput, self._indices)
    local g = gradOutput:contiguous():view(self._indices:size())
    self.gradInput:resizeAs(input):zero():scatter(dim, self._indices, g)
    return self.gradInput
  end

  function cls:clearState()
    return nn.Module.clearState(self, '_output', '_indices')
  end

  function cls:type(name, cache)  -- _indices stays a LongTensor: the buffers are remade
    if name then self._output, self._indices = nil, nil end
    return nn.Module.type(self, name, cache)
  end
end

return extremum
