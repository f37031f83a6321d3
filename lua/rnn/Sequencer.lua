-- nn.Sequencer(module): applies module to every step of a sequence (a table of steps or a
-- tensor whose first dimension is time). Non-recurrent modules are wrapped in a Recursor.
-- By default (remember 'neither') each forward starts a new sequence.
local sequence = require 'rnn.sequence'
local Sequencer, parent = torch.class('nn.Sequencer', 'nn.AbstractSequencer')

function Sequencer:__init(module)
  parent.__init(self)
  if not torch.isTypeOf(module, 'nn.Module') then
    error("Sequencer: expecting nn.Module instance at arg 1, got " .. torch.type(module))
  end
  self.module = torch.isTypeOf(module, 'nn.AbstractRecurrent') and module or nn.Recursor(module)
  self.modules = { self.module }
  self.output = {}
  self.tableoutput = {}
  self.tablegradinput = {}
  self._output = {} -- spare step outputs kept for reuse at evaluation
  local mediumEmpty = {}
  for i, name in ipairs(self.dpnn_mediumEmpty or {}) do mediumEmpty[i] = name end
  table.insert(mediumEmpty, '_output')
  self.dpnn_mediumEmpty = mediumEmpty
  self._remember = 'neither'
end

function Sequencer:updateOutput(input)
  local nStep = sequence.length('Sequencer', input)
  self.module:maxBPTTstep(nStep)
  if not self:hasMemory() then self.module:forget() end
  local isTensor = torch.isTensor(input)
  if self.train ~= false then
    -- the step outputs stay with their step clones until backward
    self.tableoutput = {}
    for step = 1, nStep do self.tableoutput[step] = self.module:updateOutput(input[step]) end
    self.output = isTensor and sequence.stack(self.output, self.tableoutput, nStep) or self.tableoutput
  elseif isTensor then
    -- evaluation reuses one module: copy each step out before the next
    for step = 1, nStep do
      local output = self.module:updateOutput(input[step])
      if step == 1 then
        self.output = torch.isTensor(self.output) and self.output or output.new()
        local size = output:size():totable()
        table.insert(size, 1, nStep)
        self.output:resize(torch.LongStorage(size))
      end
      self.output[step]:copy(output)
    end
  else
    self.tableoutput = self.tableoutput or {}
    for step = 1, nStep do
      self.tableoutput[step] = nn.rnn.recursiveCopy(self.tableoutput[step] or table.remove(self._output, 1),
        self.module:updateOutput(input[step]))
    end
    for step = nStep + 1, #self.tableoutput do
      table.insert(self._output, self.tableoutput[step])
      self.tableoutput[step] = nil
    end
    self.output = self.tableoutput
  end
  return self.output
end

function Sequencer:updateGradInput(input, gradOutput)
  local nStep = sequence.length('Sequencer', input, gradOutput, 'gradOutput')
  self.tablegradinput = {}
  for step = nStep, 1, -1 do
    self.tablegradinput[step] = self.module:updateGradInput(input[step], gradOutput[step])
  end
  if torch.isTensor(input) then
    self.gradInput = sequence.stack(self.gradInput, self.tablegradinput, nStep)
  else
    self.gradInput = self.tablegradinput
  end
  return self.gradInput
end

function Sequencer:accGradParameters(input, gradOutput, scale)
  local nStep = sequence.length('Sequencer', input, gradOutput, 'gradOutput')
  for step = nStep, 1, -1 do
    self.module:accGradParameters(input[step], gradOutput[step], scale)
  end
end

function Sequencer:accUpdateGradParameters()
  error("Sequencer:accUpdateGradParameters: Not Implemented")
end

function Sequencer:training()
  if self.train == false then
    self:forget()
    self._output = {}
    self.tableoutput = nil
  end
  parent.training(self)
end

function Sequencer:evaluate()
  if self.train ~= false then
    self:forget()
    self.tableoutput = {}
  end
  parent.evaluate(self)
end

function Sequencer:clearState()
  if torch.isTensor(self.output) then
    self.output:set()
    if torch.isTensor(self.gradInput) then self.gradInput:set() end
  else
    self.output = {}
    self.gradInput = {}
  end
  self._output = {}
  self.tableoutput = {}
  self.tablegradinput = {}
  self.module:clearState()
end

Sequencer.__tostring__ = nn.Decorator.__tostring__
