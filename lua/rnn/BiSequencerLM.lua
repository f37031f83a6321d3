-- nn.BiSequencerLM(forward[, backward, merge]): the bidirectional sequencer for language models:
-- step t merges the forward output after inputs 1..t-1 with the backward output after inputs
-- n..t+1, so no step sees its own input (zeros stand in at both ends).
local _ = require 'moses'
local BiSequencerLM, parent = torch.class('nn.BiSequencerLM', 'nn.AbstractSequencer')

local function asSequencer(module)
  -- AbstractRecurrent modules are wrapped; anything else is taken as a Sequencer (or a stack of them)
  return torch.isTypeOf(module, 'nn.AbstractRecurrent') and nn.Sequencer(module) or module
end

function BiSequencerLM:__init(forward, backward, merge)
  nn.BiSequencer.setDirections(self, forward, backward, merge)
  self.fwdSeq = asSequencer(self.forwardModule)
  self.bwdSeq = asSequencer(self.backwardModule)
  self.mergeSeq = nn.Sequencer(self.mergeModule)
  self._fwd = self.fwdSeq
  self._bwd = nn.BiSequencer.reversed(self.bwdSeq)
  self._merge = nn.Sequential():add(nn.ZipTable()):add(self.mergeSeq)
  parent.__init(self)
  self.modules = { self._fwd, self._bwd, self._merge }
  self.output = {}
  self.gradInput = {}
end

function BiSequencerLM:updateOutput(input)
  if torch.type(input) ~= 'table' then error("BiSequencerLM: expecting a table of steps at arg 1, got " .. torch.type(input)) end
  local nStep = #input
  if nStep < 2 then error("BiSequencerLM: expecting at least 2 elements in table, got " .. nStep) end
  self._fwdOutput = self._fwd:updateOutput(_.first(input, nStep - 1))
  self._bwdOutput = self._bwd:updateOutput(_.last(input, nStep - 1))
  self._firstStep = nn.rnn.recursiveFill(nn.rnn.recursiveResizeAs(self._firstStep, self._fwdOutput[1]), 0)
  self._lastStep = nn.rnn.recursiveFill(nn.rnn.recursiveResizeAs(self._lastStep, self._bwdOutput[1]), 0)
  self._mergeInput = { _.clone(self._fwdOutput), _.clone(self._bwdOutput) }
  table.insert(self._mergeInput[1], 1, self._firstStep)
  table.insert(self._mergeInput[2], self._lastStep)
  self.output = self._merge:updateOutput(self._mergeInput)
  return self.output
end

-- Calls method on the three parts with the gradients that each one's outputs received.
function BiSequencerLM:_backwardParts(method, input, gradOutput, arg)
  local nStep = #input
  self._merge[method](self._merge, self._mergeInput, gradOutput, arg)
  self._fwd[method](self._fwd, _.first(input, nStep - 1), _.last(self._mergeGradInput[1], nStep - 1), arg)
  self._bwd[method](self._bwd, _.last(input, nStep - 1), _.first(self._mergeGradInput[2], nStep - 1), arg)
end

function BiSequencerLM:updateGradInput(input, gradOutput)
  local nStep = #input
  self._mergeGradInput = self._merge:updateGradInput(self._mergeInput, gradOutput)
  local fwd = self._fwd:updateGradInput(_.first(input, nStep - 1), _.last(self._mergeGradInput[1], nStep - 1))
  local bwd = self._bwd:updateGradInput(_.last(input, nStep - 1), _.first(self._mergeGradInput[2], nStep - 1))
  self.gradInput[1] = fwd[1]
  for step = 2, nStep - 1 do
    self.gradInput[step] = nn.rnn.recursiveCopy(self.gradInput[step], fwd[step])
    nn.rnn.recursiveAdd(self.gradInput[step], bwd[step - 1])
  end
  self.gradInput[nStep] = bwd[nStep - 1]
  for step = nStep + 1, #self.gradInput do self.gradInput[step] = nil end
  return self.gradInput
end

function BiSequencerLM:accGradParameters(input, gradOutput, scale)
  self:_backwardParts('accGradParameters', input, gradOutput, scale)
end

function BiSequencerLM:accUpdateGradParameters(input, gradOutput, lr)
  self:_backwardParts('accUpdateGradParameters', input, gradOutput, lr)
end

function BiSequencerLM:__tostring__()
  local function part(m) return (tostring(m):gsub('\n', '\n    |    ')) end
  return table.concat({ torch.type(self) .. ' {',
    '  (  fwd  ): ' .. part(self._fwd),
    '  (  bwd  ): ' .. part(self._bwd),
    '  ( merge ): ' .. part(self._merge),
    '}' }, '\n')
end
