-- Removes element `index` from its input table and hands it to its PullTables (made with
-- push:pull(i)), which insert it into their own input table later in the network: a way to
-- "teleport" a tensor (e.g. SoftMaxTree's targets) past modules that only take one input.
-- The gradients the pulls receive for it are summed into gradInput[index].
local PushTable, parent = torch.class('nn.PushTable', 'nn.Module')

function PushTable:__init(index)
  parent.__init(self)
  self._index = index
  self._pulls = {}
  self.output = {}
  self.gradInput = {}
  self._gradInput = torch.Tensor()
  self._forward = false
end

function PushTable:pull(index)
  local pull = nn.PullTable(self, index)
  table.insert(self._pulls, pull)
  return pull
end

function PushTable:updateOutput(input)
  local k = self._index
  for i = #self.output, 1, -1 do self.output[i] = nil end
  for i = 1, #input do
    if i ~= k then self.output[i < k and i or i - 1] = input[i] end
  end
  for _, pull in ipairs(self._pulls) do pull:_receive(input[k]) end
  self._forward = true
  return self.output
end

-- Called by each pull's backward: the first gradient after a forward replaces, the others add.
function PushTable:_accumulate(gradOutput)
  if self._forward then
    if torch.type(self._gradInput) ~= torch.type(gradOutput) then self._gradInput = gradOutput.new() end
    self._gradInput:resizeAs(gradOutput):copy(gradOutput)
  else
    self._gradInput:add(gradOutput)
  end
  self._forward = false
end

function PushTable:updateGradInput(input, gradOutput)
  local k = self._index
  for i = #self.gradInput, 1, -1 do self.gradInput[i] = nil end
  for i = 1, #gradOutput do self.gradInput[i < k and i or i + 1] = gradOutput[i] end
  self.gradInput[k] = self._gradInput
  if #input ~= #self.gradInput then
    error(('nn.PushTable: %d inputs but %d gradients'):format(#input, #self.gradInput), 2)
  end
  return self.gradInput
end

-- The pulls are converted where they sit in the network, not through this back-reference.
function PushTable:type(type, cache)
  local pulls = self._pulls
  self._pulls = nil
  parent.type(self, type, cache)
  self._pulls = pulls
  return self
end
