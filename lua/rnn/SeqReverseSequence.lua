-- nn.SeqReverseSequence(dim): reverses the order of a tensor's entries along dimension dim
-- (the time dimension of a sequence); its gradient reverses gradOutput the same way.
local SeqReverseSequence, parent = torch.class('nn.SeqReverseSequence', 'nn.Module')

function SeqReverseSequence:__init(dim)
  parent.__init(self)
  if torch.type(dim) ~= 'number' then
    error("SeqReverseSequence: must specify the dimension to reverse the sequence over (a number)")
  end
  self.dim = dim
  self.indices = torch.LongTensor()
end

function SeqReverseSequence:_reverse(into, x, what)
  if self.dim > x:dim() then
    error(('SeqReverseSequence: %s has %d dimensions, cannot reverse dimension %d'):format(what, x:dim(), self.dim))
  end
  local n = x:size(self.dim)
  self.indices = self.indices or torch.LongTensor()
  if self.indices:nElement() ~= n or (n > 0 and self.indices[1] ~= n) then
    self.indices:resize(n)
    for i = 1, n do self.indices[i] = n - i + 1 end
  end
  return into:index(x, self.dim, self.indices)
end

function SeqReverseSequence:updateOutput(input)
  self.output = self:_reverse(self.output, input, 'input')
  return self.output
end

function SeqReverseSequence:updateGradInput(input, gradOutput)
  self.gradInput = self:_reverse(self.gradInput, gradOutput, 'gradOutput')
  return self.gradInput
end

function SeqReverseSequence:clearState()
  self.indices = torch.LongTensor()
  return parent.clearState(self)
end
