-- cudnn.SpatialConvolution: nn.SpatialConvolution with cuDNN's groups: the input planes and
-- the output planes split into `groups` equal runs, each output run convolving its input run
-- only (the weight is nOutputPlane x nInputPlane/groups x kH x kW). A grouped layer runs one
-- nn.SpatialConvolution per group over views of its weight and bias.
local shape = require 'nn.util.shape'
local tuning = require 'cudnn.tuning'

local SpatialConvolution, parent = torch.class('cudnn.SpatialConvolution', 'nn.SpatialConvolution')
SpatialConvolution._deviceKernel = true
SpatialConvolution.keepsGroups = true   -- read by the upgrade of lua/nn/util/legacy.lua
tuning(SpatialConvolution)

function SpatialConvolution:__init(nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH, groups)
  groups = groups or 1
  if not (type(groups) == 'number' and groups >= 1 and nInputPlane % groups == 0 and nOutputPlane % groups == 0) then
    shape.fail(self, 'groups (%s) must divide nInputPlane (%s) and nOutputPlane (%s)',
      tostring(groups), tostring(nInputPlane), tostring(nOutputPlane))
  end
  parent.__init(self, nInputPlane, nOutputPlane, kW, kH, dW, dH, padW, padH or 0)
  self.groups = groups
  if groups > 1 then
    local sizes = { nOutputPlane, nInputPlane / groups, kH, kW }
    self.weight = torch.Tensor(table.unpack(sizes))
    self.gradWeight = torch.Tensor(table.unpack(sizes))
    self:reset()
  end
end

-- As cuDNN: uniform in +-1/sqrt(fan-in), the fan-in of one group.
function SpatialConvolution:reset(stdv)
  local fanIn = self.kW * self.kH * self.nInputPlane / (self.groups or 1)
  stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(fanIn)
  self.weight:uniform(-stdv, stdv)
  if self.bias then self.bias:uniform(-stdv, stdv) end
end

-- Per module (kept off it): one nn.SpatialConvolution per group.
local children = setmetatable({}, { __mode = 'k' })

-- The groups' convolutions, their views of the parameters refreshed, and the plane dim.
local function groupsOf(self, input)
  local batch = shape.input(self, input, 2, self.nInputPlane)
  local G = self.groups
  if self.nInputPlane % G ~= 0 or self.nOutputPlane % G ~= 0 then
    shape.fail(self, 'groups (%d) must divide nInputPlane (%d) and nOutputPlane (%d)', G,
      self.nInputPlane, self.nOutputPlane)
  end
  local list = children[self]
  if not list or list[1].output:type() ~= input:type() then
    list = {}
    for g = 1, G do
      local c = torch.factory('nn.SpatialConvolution')()
      c.output, c.gradInput, c.train = input.new(), input.new(), true
      list[g] = c
    end
    children[self] = list
  end
  local inG, outG = self.nInputPlane / G, self.nOutputPlane / G
  for g, c in ipairs(list) do
    c.nInputPlane, c.nOutputPlane = inG, outG
    c.kW, c.kH, c.dW, c.dH, c.padW, c.padH = self.kW, self.kH, self.dW, self.dH, self.padW, self.padH
    local from = (g - 1) * outG + 1
    c.weight, c.gradWeight = self.weight:narrow(1, from, outG), self.gradWeight:narrow(1, from, outG)
    c.bias = self.bias and self.bias:narrow(1, from, outG)
    c.gradBias = self.gradBias and self.gradBias:narrow(1, from, outG)
  end
  return list, batch and 2 or 1, inG, outG
end

function SpatialConvolution:updateOutput(input)
  if (self.groups or 1) == 1 then return parent.updateOutput(self, input) end
  local list, dim, inG = groupsOf(self, input)
  local outs = {}
  for g, c in ipairs(list) do outs[g] = c:updateOutput(input:narrow(dim, (g - 1) * inG + 1, inG)) end
  return torch.cat(self.output, outs, dim)
end

function SpatialConvolution:updateGradInput(input, gradOutput)
  if (self.groups or 1) == 1 then return parent.updateGradInput(self, input, gradOutput) end
  local list, dim, inG, outG = groupsOf(self, input)
  shape.gradOutput(self, gradOutput, self.output:size():totable())
  local grads = {}
  for g, c in ipairs(list) do
    grads[g] = c:updateGradInput(input:narrow(dim, (g - 1) * inG + 1, inG),
      gradOutput:narrow(dim, (g - 1) * outG + 1, outG))
  end
  return torch.cat(self.gradInput, grads, dim)
end

function SpatialConvolution:accGradParameters(input, gradOutput, scale)
  if (self.groups or 1) == 1 then return parent.accGradParameters(self, input, gradOutput, scale) end
  local list, dim, inG, outG = groupsOf(self, input)
  for g, c in ipairs(list) do
    c:accGradParameters(input:narrow(dim, (g - 1) * inG + 1, inG),
      gradOutput:narrow(dim, (g - 1) * outG + 1, outG), scale)
  end
end

function SpatialConvolution:__tostring__()
  local s = parent.__tostring__(self)
  if (self.groups or 1) > 1 then s = s:gsub('%)', (', groups %d)'):format(self.groups), 1) end
  return s
end
