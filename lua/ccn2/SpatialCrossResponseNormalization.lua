-- ccn2.SpatialCrossResponseNormalization(size, addScale, powScale, minDiv, blocked): normalization
-- across planes, as cuda-convnet2's convResponseNormCrossMap (blocked = false) over planes x h x w x
-- batch: with s = addScale / size (the constructor divides, as cuda-convnet2's layer.py does),
--   d[f] = minDiv + s * sum of x[f']^2 over f' = f - floor(size/2) .. f - floor(size/2) + size - 1
--   (planes outside the image left out), and y[f] = x[f] * d[f]^-powScale,
-- so that gradInput[c] = g[c] d[c]^-p - 2 p s x[c] * sum over the f whose window holds c of
-- g[f] x[f] d[f]^(-p-1). Plane sums run as cumulative sums along the planes.
local CRN, parent = torch.class('ccn2.SpatialCrossResponseNormalization', 'nn.Module')

function CRN:__init(size, addScale, powScale, minDiv, blocked)
  parent.__init(self)
  self.size = size
  self.addScale = (addScale or 0.0001) / size
  self.powScale = powScale or 0.75
  self.minDiv = minDiv or 1.0
  self.blocked = blocked or false
  if self.blocked then
    error('ccn2.SpatialCrossResponseNormalization: blocked windows are not supported', 2)
  end
end

-- t[f] = sum of v[f'] for f' in [f - before, f + after], clipped to the planes (dim 1)
local function windowSum(v, before, after)
  local F = v:size(1)
  local rest = v[1]:size():totable()
  local c = v.new(F + 1, table.unpack(rest)):zero()
  c:narrow(1, 2, F):copy(v:cumsum(1))
  local t = v.new():resizeAs(v)
  for f = 1, F do
    local lo, hi = math.max(1, f - before), math.min(F, f + after)
    t[f]:copy(c[hi + 1]):add(-1, c[lo])
  end
  return t
end

function CRN:updateOutput(input)
  ccn2.typecheck(input)
  ccn2.inputcheck(input)
  local h = math.floor(self.size / 2)
  self._denom = windowSum(torch.cmul(input, input), h, self.size - 1 - h):mul(self.addScale):add(self.minDiv)
  self.output = torch.pow(self._denom, -self.powScale):cmul(input)
  return self.output
end

function CRN:updateGradInput(input, gradOutput)
  ccn2.typecheck(gradOutput)
  self:updateOutput(input)
  local h = math.floor(self.size / 2)
  local p = self.powScale
  -- r[f] = g[f] x[f] d[f]^(-p-1); plane c gathers the f with f - h <= c <= f - h + size - 1
  local r = torch.pow(self._denom, -p - 1):cmul(gradOutput):cmul(input)
  local gathered = windowSum(r, self.size - 1 - h, h)
  self.gradInput = torch.pow(self._denom, -p):cmul(gradOutput)
  self.gradInput:add(-2 * p * self.addScale, gathered:cmul(input))
  return self.gradInput
end

function CRN:clearState()
  self._denom = nil
  return parent.clearState(self)
end

function CRN:__tostring__()
  return ('%s(%d, %g, %g, %g)'):format(torch.type(self), self.size, self.addScale * self.size, self.powScale, self.minDiv)
end
