-- nn.MaskZeroCriterion(criterion, nInputDim): applies criterion to the samples of a batch whose
-- input is not all zeros; the others get zero loss and zero gradient.
local MaskZeroCriterion, parent = torch.class('nn.MaskZeroCriterion', 'nn.Criterion')

function MaskZeroCriterion:__init(criterion, nInputDim)
  parent.__init(self)
  if not torch.isTypeOf(criterion, 'nn.Criterion') then
    error("MaskZeroCriterion: expecting nn.Criterion at arg 1, got " .. torch.type(criterion))
  end
  if torch.type(nInputDim) ~= 'number' then
    error("MaskZeroCriterion: expecting nInputDim number at arg 2, got " .. torch.type(nInputDim))
  end
  self.criterion = criterion
  self.nInputDim = nInputDim
end

MaskZeroCriterion.recursiveGetFirst = nn.MaskZero.recursiveGetFirst
MaskZeroCriterion._sampleNorms = nn.MaskZero._sampleNorms

-- dst = the rows `indices` of src (nested)
function MaskZeroCriterion:recursiveMask(dst, src, indices)
  if torch.type(src) == 'table' then
    dst = torch.type(dst) == 'table' and dst or {}
    for k, v in ipairs(src) do dst[k] = self:recursiveMask(dst[k], v, indices) end
    return dst
  end
  dst = torch.isTensor(dst) and dst or src.new()
  return dst:index(src, 1, indices)
end

function MaskZeroCriterion:updateOutput(input, target)
  local norms = self:_sampleNorms(input)
  if not self.batchmode then error("MaskZeroCriterion: does not support online (i.e. non-batch) mode") end
  local kept = norms:double():ne(0):nonzero()
  self.zeroMask = self.zeroMask or torch.LongTensor()
  if kept:nElement() > 0 then self.zeroMask:resize(kept:size(1)):copy(kept:select(2, 1)) else self.zeroMask:resize(0) end
  if self.zeroMask:nElement() == 0 then
    self.output = 0
    return self.output
  end
  self.input = self:recursiveMask(self.input, input, self.zeroMask)
  self.target = self:recursiveMask(self.target, target, self.zeroMask)
  self.output = self.criterion:updateOutput(self.input, self.target)
  return self.output
end

-- dst shaped as input, zero except the rows `indices`, which come from src.
function MaskZeroCriterion:recursiveMaskGradInput(dst, indices, src, input)
  if torch.type(input) == 'table' then
    dst = torch.type(dst) == 'table' and dst or { dst }
    src = torch.type(src) == 'table' and src or { src }
    for key in pairs(input) do dst[key] = self:recursiveMaskGradInput(dst[key], indices, src[key], input[key]) end
    for i = #input + 1, #dst do dst[i] = nil end
    return dst
  end
  dst = torch.isTensor(dst) and dst or input.new()
  dst:resizeAs(input):zero()
  if indices:nElement() > 0 then dst:indexCopy(1, indices, src) end
  return dst
end

function MaskZeroCriterion:updateGradInput(input, target)
  if self.zeroMask:nElement() > 0 then
    self._gradInput = self.criterion:updateGradInput(self.input, self.target)
  end
  self.gradInput = self:recursiveMaskGradInput(self.gradInput, self.zeroMask, self._gradInput, input)
  return self.gradInput
end

function MaskZeroCriterion:type(type, ...)
  self.zeroMask, self._zeroMask, self.input, self.target, self._gradInput = nil, nil, nil, nil, nil
  return parent.type(self, type, ...)
end
