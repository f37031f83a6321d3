-- ccn2.SpatialConvolution(nInputPlane, nOutputPlane, kH, dH, padding, groups, partialSum): a square
-- kH x kH convolution with stride dH and `padding` zeros on every side, over planes x h x w x batch.
-- As cuda-convnet2's convFilterActs: the output has ceil((2 padding + h - kH) / dH) + 1 rows (the
-- last window may reach past the padding: zeros there), the input planes and the filters split
-- into `groups` runs (filter run g sees input run g only), and the weight is
-- (nInputPlane/groups * kH * kH) x nOutputPlane, row (plane, y, x) of one group's planes, column a
-- filter. Each group runs as an nn.SpatialConvolution on a copy of its filters, after nn's
-- zero padding; partialSum (how the GPU kernel splits its weight gradient sums) changes nothing.
local SpatialConvolution, parent = torch.class('ccn2.SpatialConvolution', 'nn.Module')

function SpatialConvolution:__init(nInputPlane, nOutputPlane, kH, dH, padding, groups, partialSum)
  parent.__init(self)
  dH = dH or 1
  padding = padding or 0
  groups = groups or 1
  if not (nInputPlane >= 1 and (nInputPlane <= 3 or math.fmod(nInputPlane, 4) == 0)) then
    error('Assertion failed: [(nInputPlane >= 1 and (nInputPlane <= 3 or math.fmod(nInputPlane, 4)))]. '
      .. 'Number of input channels has to be 1, 2, 3 or a multiple of 4', 2)
  end
  if math.fmod(nOutputPlane, 16) ~= 0 then
    error('Assertion failed: [math.fmod(nOutputPlane, 16) == 0]. Number of output planes has to be a multiple of 16.', 2)
  end
  if nInputPlane % groups ~= 0 or nOutputPlane % groups ~= 0 then
    error(('ccn2.SpatialConvolution: groups (%d) must divide nInputPlane (%d) and nOutputPlane (%d)')
      :format(groups, nInputPlane, nOutputPlane), 2)
  end
  self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
  self.kH, self.dH, self.padding, self.groups, self.partialSum = kH, dH, padding, groups, partialSum
  self.weight = torch.Tensor(nInputPlane * kH * kH / groups, nOutputPlane)
  self.bias = torch.Tensor(nOutputPlane)
  self.gradWeight = torch.Tensor(nInputPlane * kH * kH / groups, nOutputPlane)
  self.gradBias = torch.Tensor(nOutputPlane)
  self:reset()
end

function SpatialConvolution:reset(stdv)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(self.kH * self.kH * self.nInputPlane / self.groups)
  self.weight:uniform(-stdv, stdv)
  self.bias:uniform(-stdv, stdv)
end

-- the padded batch-first input, one nn.SpatialConvolution per group with the group's filters
-- (nOutputPlane/groups x nInputPlane/groups x kH x kH) copied in, and the output's rows
function SpatialConvolution:_prepare(input)
  ccn2.typecheck(input)
  ccn2.inputcheck(input)
  if input:size(1) ~= self.nInputPlane then
    error(('ccn2.SpatialConvolution: input has %d planes, expected %d'):format(input:size(1), self.nInputPlane), 3)
  end
  local iH, k, d, p, G = input:size(2), self.kH, self.dH, self.padding, self.groups
  local oH = math.ceil((2 * p + iH - k) / d) + 1
  if oH < 1 then
    error(('ccn2.SpatialConvolution: a %dx%d image with padding %d is smaller than the %dx%d filter'):format(iH, iH, p, k, k), 3)
  end
  local extra = (oH - 1) * d + k - (iH + 2 * p)   -- zeros past the padding the last window reaches
  self._pad = self._pad or nn.SpatialZeroPadding(0, 0, 0, 0)
  self._pad.pad_l, self._pad.pad_r, self._pad.pad_t, self._pad.pad_b = p, p + extra, p, p + extra
  self._pad:type(input:type())
  local inG, outG = self.nInputPlane / G, self.nOutputPlane / G
  local filters = self.weight:view(inG, k, k, self.nOutputPlane):permute(4, 1, 2, 3)
  self._convs = self._convs or {}
  for g = 1, G do
    local c = self._convs[g]
    if not c or c.weight:type() ~= input:type() then
      c = nn.SpatialConvolution(inG, outG, k, k, d, d):type(input:type())
      self._convs[g] = c
    end
    c.weight:copy(filters:narrow(1, (g - 1) * outG + 1, outG))
    c.bias:copy(self.bias:narrow(1, (g - 1) * outG + 1, outG))
  end
  return self._pad:updateOutput(ccn2.toBatchFirst(input)), inG, outG, oH
end

function SpatialConvolution:updateOutput(input)
  local x, inG, outG, oH = self:_prepare(input)
  local y = input.new(input:size(4), self.nOutputPlane, oH, oH)
  for g, c in ipairs(self._convs) do
    y:narrow(2, (g - 1) * outG + 1, outG):copy(c:updateOutput(x:narrow(2, (g - 1) * inG + 1, inG)))
  end
  self.output = ccn2.toBatchLast(y)
  return self.output
end

function SpatialConvolution:updateGradInput(input, gradOutput)
  ccn2.typecheck(gradOutput)
  local x, inG, outG = self:_prepare(input)
  local gy = ccn2.toBatchFirst(gradOutput)
  local gx = x.new():resizeAs(x)
  for g, c in ipairs(self._convs) do
    local xg = x:narrow(2, (g - 1) * inG + 1, inG)
    gx:narrow(2, (g - 1) * inG + 1, inG):copy(c:updateGradInput(xg, gy:narrow(2, (g - 1) * outG + 1, outG)))
  end
  self.gradInput = ccn2.toBatchLast(self._pad:updateGradInput(ccn2.toBatchFirst(input), gx))
  return self.gradInput
end

function SpatialConvolution:accGradParameters(input, gradOutput, scale)
  scale = scale or 1
  local x, inG, outG = self:_prepare(input)
  local gy = ccn2.toBatchFirst(gradOutput)
  local k = self.kH
  local gradFilters = self.gradWeight:view(inG, k, k, self.nOutputPlane):permute(4, 1, 2, 3)
  for g, c in ipairs(self._convs) do
    c.gradWeight:zero(); c.gradBias:zero()
    c:accGradParameters(x:narrow(2, (g - 1) * inG + 1, inG), gy:narrow(2, (g - 1) * outG + 1, outG), scale)
    gradFilters:narrow(1, (g - 1) * outG + 1, outG):add(c.gradWeight)
    self.gradBias:narrow(1, (g - 1) * outG + 1, outG):add(c.gradBias)
  end
end

function SpatialConvolution:clearState()
  self._convs, self._pad = nil, nil
  return parent.clearState(self)
end

function SpatialConvolution:__tostring__()
  return ('%s(%d -> %d, %dx%d, %d, %d%s)'):format(torch.type(self), self.nInputPlane, self.nOutputPlane,
    self.kH, self.kH, self.dH, self.padding, self.groups > 1 and ', groups ' .. self.groups or '')
end
