-- Argument checks shared by the convolution, pooling and padding modules: errors name the
-- module and the sizes involved.
local check = require 'torch.core.check'
local backend = require 'torch.backend'

local shape = {}
local sizestr = check.sizestr
local layouts = { 'W', 'H x W', 'T x H x W' }
local floating = { ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true,
                   ['torch.CudaTensor'] = true, ['torch.CudaDoubleTensor'] = true }

local function fail(self, fmt, ...)
  check.error(torch.typename(self) .. ': ' .. fmt:format(...))
end
shape.fail = fail

-- Checks a (planes x spatial) or (batch x planes x spatial) input with `sdims` spatial dims and,
-- when `planes` is given, that many planes; a module with a weight needs input of its type.
-- CUDA input is refused unless the module's own class sets _deviceKernel (not inherited: a
-- subclass may run other loops).
-- Returns whether it is a batch, the batch size (1 if not), the plane count and the spatial
-- sizes as a table.
function shape.input(self, input, sdims, planes)
  if not torch.isTensor(input) then fail(self, 'input must be a tensor, got %s', torch.type(input)) end
  local nd = input:dim()
  if nd ~= sdims + 1 and nd ~= sdims + 2 then
    fail(self, 'expected %dD (planes x %s) or %dD (batch x planes x %s) input, got %dD input of size %s',
      sdims + 1, layouts[sdims], sdims + 2, layouts[sdims], nd, sizestr(input))
  end
  if not backend.onHost(input) and not rawget(getmetatable(self), '_deviceKernel') then
    fail(self, 'CUDA tensors are not supported (input is a %s)', torch.typename(input))
  end
  if not floating[torch.typename(input)] then
    fail(self, 'expected a FloatTensor or DoubleTensor input, got %s', torch.typename(input))
  end
  if self.weight and self.weight:type() ~= input:type() then
    fail(self, 'input is a %s but the weight is a %s (convert the module with :type())',
      torch.typename(input), torch.typename(self.weight))
  end
  if input:nElement() == 0 then fail(self, 'input of size %s has no elements', sizestr(input)) end
  local batch = nd == sdims + 2
  local first = batch and 2 or 1
  local C = input:size(first)
  if planes and C ~= planes then
    fail(self, 'expected input with %d planes in dimension %d, got %d (input size %s)',
      planes, first, C, sizestr(input))
  end
  local sizes = {}
  for d = 1, sdims do sizes[d] = input:size(first + d) end
  return batch, batch and input:size(1) or 1, C, sizes
end

-- Raises unless every output size is at least 1.
function shape.output(self, input, outSizes, what)
  for d = 1, #outSizes do
    if outSizes[d] < 1 then
      local o = {}
      for k = 1, #outSizes do o[k] = outSizes[k] end
      fail(self, 'input of size %s is too small for %s: the output would be %s',
        sizestr(input), what, table.concat(o, 'x'))
    end
  end
end

-- Whether tensor t has the given sizes (a table), without a loop up to 5 dims.
local function hasSizes(t, sizes)
  local n = #sizes
  if t:dim() ~= n then return false end
  if n > 5 then
    for d = 6, n do if t:size(d) ~= sizes[d] then return false end end
  end
  return (n < 1 or t:size(1) == sizes[1]) and (n < 2 or t:size(2) == sizes[2])
    and (n < 3 or t:size(3) == sizes[3]) and (n < 4 or t:size(4) == sizes[4])
    and (n < 5 or t:size(5) == sizes[5])
end

-- Raises unless gradOutput is a tensor of the given sizes (the output's).
function shape.gradOutput(self, gradOutput, sizes)
  if torch.isTensor(gradOutput) and getmetatable(gradOutput) == getmetatable(self.output) and hasSizes(gradOutput, sizes) then
    return
  end
  if not torch.isTensor(gradOutput) then
    fail(self, 'gradOutput must be a tensor, got %s', torch.type(gradOutput))
  end
  local ok = gradOutput:dim() == #sizes
  for d = 1, #sizes do ok = ok and gradOutput:size(d) == sizes[d] end
  if not ok then
    fail(self, 'gradOutput of size %s does not match the output size %s',
      sizestr(gradOutput), table.concat(sizes, 'x'))
  end
  if gradOutput:type() ~= self.output:type() then
    fail(self, 'gradOutput is a %s but the output is a %s', torch.typename(gradOutput),
      torch.typename(self.output))
  end
end

-- t resized to sizes (a table) unless it has them already (then without the tables a resize
-- makes).
function shape.resize(t, sizes)
  if not t:storage() or not hasSizes(t, sizes) then t:resize(sizes) end
  return t
end

-- Raises unless every value is an integer >= lo, "positive" or "non-negative" as the message says.
local function atLeast(lo, kind)
  return function(self, what, ...)
    for i = 1, select('#', ...) do
      local v = select(i, ...)
      if not check.isInt(v) or v < lo then
        local vals = {}
        for k = 1, select('#', ...) do
          local x = select(k, ...)
          vals[k] = type(x) == 'number' and tostring(x) or torch.type(x)
        end
        fail(self, '%s must be %s integers, got %s', what, kind, table.concat(vals, ', '))
      end
    end
  end
end
shape.positive = atLeast(1, 'positive')         -- kernel sizes, strides, dilations
shape.nonNegative = atLeast(0, 'non-negative')  -- paddings, output adjustments

return shape
