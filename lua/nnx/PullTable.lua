-- The receiving end of a PushTable (push:pull(index)): inserts the pushed tensor at `index` of its
-- input table (a tensor input counts as a table of one), and sends that element's gradient back
-- to the push.
local PullTable, parent = torch.class('nn.PullTable', 'nn.Module')

function PullTable:__init(push, index)
  parent.__init(self)
  self._push, self._index = push, index
  self.output = {}
  self.gradInput = {}
end

function PullTable:_receive(pushed)
  self._pushed = pushed
end

local function elements(input)
  if torch.type(input) == 'table' then return input end
  return {input}
end

function PullTable:updateOutput(input)
  local k, inputs = self._index, elements(input)
  if k < 1 or k > #inputs + 1 then
    error(('nn.PullTable: index %d out of range for %d inputs'):format(k, #inputs), 2)
  end
  for i = #self.output, 1, -1 do self.output[i] = nil end
  for i = 1, #inputs do self.output[i < k and i or i + 1] = inputs[i] end
  self.output[k] = self._pushed
  return self.output
end

function PullTable:updateGradInput(input, gradOutput)
  local k = self._index
  self._push:_accumulate(gradOutput[k])
  if torch.type(input) ~= 'table' then
    self.gradInput = gradOutput[k == 1 and 2 or 1]
    return self.gradInput
  end
  if torch.type(self.gradInput) ~= 'table' then self.gradInput = {} end
  for i = #self.gradInput, 1, -1 do self.gradInput[i] = nil end
  for i = 1, #gradOutput do
    if i ~= k then self.gradInput[i < k and i or i - 1] = gradOutput[i] end
  end
  return self.gradInput
end

function PullTable:type(type, cache)
  local push = self._push
  self._push = nil
  parent.type(self, type, cache)
  self._push = push
  return self
end
