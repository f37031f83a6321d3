-- x for x > 0, a * x otherwise, with a learned slope a per input plane (nOutputPlane; dim 1
-- of a vector, dim 2 of a batch) or one shared slope (nOutputPlane 0 or nil). Slopes start at 0.25.
local check = require 'torch.core.check'
local backend = require 'torch.backend'
local pointwise = require 'nn.util.pointwise'
local PReLU, parent = torch.class('nn.PReLU', 'nn.Module')

local forward = backend.cpu.kernel(3, '$1 = $2 > 0 and $2 or $3 * $2')
local backward = backend.cpu.kernel(4, '$1 = $2 > 0 and $3 or $4 * $3')
local slopeGrad = backend.cpu.kernel(3, '$1 = $2 > 0 and 0 or $2 * $3')

-- The same passes as tensor ops, for device (CUDA) tensors: max(x, 0) + w min(x, 0), the slope
-- w + mask (1 - w) with mask = (x > 0), and min(x, 0) gradOutput for the weight.
local device = {
  forward = function(self, out, x, w)
    local below = torch.cmin(pointwise.scratch(self, '_part', x), x, 0):cmul(w)
    out:cmax(x, 0):add(below)
  end,
  backward = function(self, gi, x, go, w)
    local above = pointwise.mask(self, x, 0)
    local slope = pointwise.scratch(self, '_part', x):copy(w):addcmul(-1, above, w):add(above)
    gi:cmul(go, slope)
  end,
  slopeGrad = function(_, buf, x, go) torch.cmin(buf, x, 0):cmul(go) end,
}
local host = {
  forward = function(_, ...) forward(...) end,
  backward = function(_, ...) backward(...) end,
  slopeGrad = function(_, ...) slopeGrad(...) end,
}
local function passes(t) return backend.of(t) == backend.cpu and host or device end

function PReLU:__init(nOutputPlane)
  parent.__init(self)
  self.nOutputPlane = check.optInt('nn.PReLU', nOutputPlane, 'nOutputPlane', 0) or 0
  local nSlopes = math.max(self.nOutputPlane, 1)
  self.weight = torch.Tensor(nSlopes):fill(0.25)
  self.gradWeight = torch.Tensor(nSlopes)
end

-- input (contiguous) as batch x planes x rest, and the slopes expanded to that shape.
function PReLU:views(input)
  pointwise.checkInput(self, input, true)
  input = input:contiguous()
  local n = input:nElement()
  if self.nOutputPlane == 0 then
    local x = input:view(1, 1, n)
    return x, self.weight:view(1, 1, 1):expandAs(x)
  end
  local nd = input:dim()
  local planeDim = nd > 1 and 2 or 1
  if nd == 0 or input:size(planeDim) ~= self.nOutputPlane then
    check.error(('nn.PReLU: wrong number of input planes: expected %d, got input %s'):format(
      self.nOutputPlane, check.sizestr(input)))
  end
  local batch = nd > 1 and input:size(1) or 1
  local x = input:view(batch, self.nOutputPlane, n / (batch * self.nOutputPlane))
  return x, self.weight:view(1, self.nOutputPlane, 1):expandAs(x)
end

function PReLU:updateOutput(input)
  local x, w = self:views(input)
  self.output:resizeAs(input)
  passes(x).forward(self, self.output:view(x:size()), x, w)
  return self.output
end

function PReLU:updateGradInput(input, gradOutput)
  local x, w = self:views(input)
  check.sameElements('nn.PReLU', input, gradOutput)
  self.gradInput:resizeAs(input)
  passes(x).backward(self, self.gradInput:view(x:size()), x, gradOutput:contiguous():view(x:size()), w)
  return self.gradInput
end

function PReLU:accGradParameters(input, gradOutput, scale)
  local x = self:views(input)
  check.sameElements('nn.PReLU', input, gradOutput)
  self._buf = self._buf or input.new()
  self._buf:resize(x:size())
  passes(x).slopeGrad(self, self._buf, x, gradOutput:contiguous():view(x:size()))
  local perPlane = torch.sum(torch.sum(self._buf, 3), 1)
  self.gradWeight:add(scale or 1, perPlane:view(self.gradWeight:size()))
  return self.gradWeight
end

function PReLU:clearState()
  return parent.clearState(self, '_buf', '_part', '_mask', '_above', '_below')
end
