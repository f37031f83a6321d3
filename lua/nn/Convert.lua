-- Converts between tensor layouts named by axis letters: 'b' batch, 'f' features, 't' time,
-- 'c' channels, 'h' height, 'w' width..., e.g. nn.Convert('bchw', 'chwb') or ('bchw', 'bf').
-- 'b*' means any layout with the batch first (identity). Inputs with fewer dims than the
-- input shape are single samples (a unit batch dim is inserted, then removed from the output).
-- Layouts with the same letters become a nn.Transpose; others a method named by the output
-- shape (bf, b, bt). The converter is built on the first forward; input of another tensor type
-- is copied to the module's type.
local check = require 'torch.core.check'
local Convert, parent = torch.class('nn.Convert', 'nn.Container')

local function withBatch(shape) return shape:find('b') and shape or 'b' .. shape end

function Convert:__init(inputShape, outputShape)
  check.optString('nn.Convert', inputShape, 'inputShape')
  check.optString('nn.Convert', outputShape, 'outputShape')
  if outputShape and not inputShape then error('nn.Convert: expecting non-nil arg 1 when arg 2 is provided') end
  inputShape = inputShape or 'b*'
  self.inputShape = withBatch(inputShape)
  self.outputShape = withBatch(outputShape or inputShape)
  self.inputBatchDim = self.inputShape:find('b')
  self.outputBatchDim = self.outputShape:find('b')
  if self.inputShape == 'b*' or self.outputShape == 'b*' then
    assert(self.inputShape == 'b*' and self.outputShape == 'b*', 'nn.Convert: both or neither shapes must be b*')
    self.nInputDim, self.nOutputDim = -1, -1
    self.transposition = true
  else
    self.nInputDim, self.nOutputDim = #self.inputShape, #self.outputShape
    if self.nInputDim == self.nOutputDim then
      self.transposition = true
      for i = 1, self.nInputDim do
        if not self.outputShape:find(self.inputShape:sub(i, i), 1, true) then
          self.transposition = false
          break
        end
      end
    end
  end
  parent.__init(self)
end

function Convert:buildConverter(input)
  if self.transposition then
    self.converter = self:transpose(self.outputShape)
  else
    if torch.type(self[self.outputShape]) ~= 'function' then
      error(string.format('nn.Convert: unrecognized conversion of shape %s to %s', self.inputShape, self.outputShape))
    end
    self.converter = self[self.outputShape](self, input)
  end
  self.converter:type(torch.type(self.output))
  self.modules[1] = self.converter
end

-- input (already of the module's type) with any missing batch dim added, and the batch flag.
function Convert:_batchInput(input)
  if input:dim() >= self.nInputDim then return input, true end
  local size = input:size():totable()
  table.insert(size, self.inputBatchDim, 1)
  self.__input = self.__input or input.new()
  self.__input:set(input):resize(table.unpack(size))
  return self.__input, false
end

function Convert:updateOutput(input)
  assert(torch.isTensor(input), 'nn.Convert: expecting a Tensor')
  if not torch.isTypeOf(input, torch.type(self.output)) then
    self._input = self._input or self.output.new()
    input = self._input:resize(input:size()):copy(input)
  end
  input, self.batchMode = self:_batchInput(input)
  if not self.converter then self:buildConverter(input) end
  self.output = self.converter:updateOutput(input)
  if not self.batchMode then
    local size = self.output:size():totable()
    table.remove(size, self.outputBatchDim)
    self.__output = self.__output or self.output.new()
    self.output = self.__output:set(self.output):resize(table.unpack(size))
  end
  return self.output
end

function Convert:updateGradInput(input, gradOutput)
  local outerSize = input:size()
  input = self._input or input
  if not self.batchMode then
    input = self.__input
    self.__gradOutput = self.__gradOutput or gradOutput.new()
    gradOutput = self.__gradOutput:set(gradOutput:contiguous()):resize(self.converter.output:size())
  end
  local gradInput = self.converter:updateGradInput(input, gradOutput)
  if not self.batchMode then
    self.__gradInput = self.__gradInput or gradInput.new()
    gradInput = self.__gradInput:set(gradInput:contiguous()):resize(outerSize)
  end
  if self._input then
    self._gradInput = self._gradInput or input.new()
    self.gradInput = self._gradInput:resize(outerSize):copy(gradInput)
  else
    self.gradInput = gradInput
  end
  return self.gradInput
end

for _, method in ipairs { 'accGradParameters', 'accUpdateGradParameters' } do
  Convert[method] = function(self, input, gradOutput, arg)
    input = (not self.batchMode) and self.__input or self._input or input
    gradOutput = (not self.batchMode) and self.__gradOutput or gradOutput
    self.converter[method](self.converter, input, gradOutput, arg)
  end
end

-- Conversions to layouts that are not transpositions of the input layout.
function Convert:bf(input)
  local bPos = self:findAxis('b', self.inputShape)
  local dim = #self.inputShape
  if self.inputShape == 'bt' then error('nn.Convert: conversion of shape bt to bf not supported') end
  if dim == 1 then return nn.Reshape(1) end
  local transpose = bPos ~= 1 and nn.Transpose({ 1, bPos }) or nil
  if dim <= 2 then return transpose or nn.Identity() end
  local reshape = nn.Reshape(input:select(bPos, 1):nElement())
  return transpose and nn.Sequential():add(transpose):add(reshape) or reshape
end

function Convert:b(input)
  local shape = self.inputShape
  if shape == 'bt' or shape == 'tb' then return nn.Select(self:findAxis('t'), 1) end
  if shape == 'bf' or shape == 'fb' then
    local fPos = self:findAxis('f')
    if input:size(fPos) > 1 then error('nn.Convert: cannot convert shape ' .. shape .. ' to b when feature > 1') end
    return nn.Select(fPos, 1)
  end
  error('nn.Convert: cannot convert shape ' .. shape .. ' to shape b')
end

function Convert:default() return nn.Identity() end

function Convert:bt()
  if self.inputShape ~= 'b' then error("nn.Convert: cannot convert shape '" .. self.inputShape .. "' to bt") end
  return nn.Reshape(1)
end

-- The nn.Transpose (a sequence of dim swaps) reordering inputShape's axes into newShape.
function Convert:transpose(newShape)
  if newShape == self.inputShape then return nn.Identity() end
  local axes = {}
  for i = 1, #self.inputShape do axes[i] = self.inputShape:sub(i, i) end
  local swaps = {}
  for i = 1, #newShape do
    local want = newShape:sub(i, i)
    local j = i
    while axes[j] ~= want do j = j + 1 end
    if j ~= i then
      axes[i], axes[j] = axes[j], axes[i]
      swaps[#swaps + 1] = { j, i }
    end
  end
  return nn.Transpose(table.unpack(swaps))
end

function Convert:findAxis(axisChar, shape, silent)
  shape = shape or self.inputShape
  local pos = shape:find(axisChar, 1, true)
  if not silent and not pos then error("nn.Convert: shape '" .. shape .. "' has no axis '" .. axisChar .. "'", 2) end
  return pos
end

function Convert:clearState()
  self._input, self._gradInput = nil, nil
  self.__input, self.__output, self.__gradInput, self.__gradOutput = nil, nil, nil, nil
  return self
end

function Convert:type(typeName)
  self:clearState()
  return parent.type(self, typeName)
end
