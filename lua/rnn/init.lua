-- rnn: Element-Research's recurrent library (its last release): recurrent modules that take one
-- time-step per forward with back-propagation through time, sequencers that take whole
-- sequences, and their criterions. Needs dpnn (sharedClone and the Module extensions).
require 'nn'
require 'dpnn'
require 'torchx' -- torch.find for TrimZero, and what rnn scripts expect loaded
local _ = require 'moses'

-- a script's own global named rnn (often its model) is not rnn's table
rnn = (type(rnn) == 'table' and not torch.typename(rnn)) and rnn or {}
rnn.version = 2.1 -- [get,set][Grad]HiddenState(step)
nn.rnn = rnn -- the classes call nn.rnn.recursive*
unpack = unpack or table.unpack

require 'rnn.recursiveUtils'
require 'rnn.Module'
require 'rnn.Dropout'

local classes = {
  -- support modules
  'LinearNoBias', 'SAdd', 'CopyGrad', 'ExpandAs',
  -- recurrent modules
  'LookupTableMaskZero', 'MaskZero', 'TrimZero', 'AbstractRecurrent', 'Recurrent', 'LSTM', 'FastLSTM',
  'GRU', 'Mufuru', 'Recursor', 'Recurrence', 'NormStabilizer', 'LinearRNN', 'LookupRNN',
  -- sequencers
  'AbstractSequencer', 'Repeater', 'Sequencer', 'BiSequencer', 'BiSequencerLM', 'RecurrentAttention',
  -- sequencer + recurrent modules
  'SeqLSTM', 'SeqLSTMP', 'SeqGRU', 'SeqReverseSequence', 'SeqBRNN',
  -- criterions
  'SequencerCriterion', 'RepeaterCriterion', 'MaskZeroCriterion',
}
for _, name in ipairs(classes) do
  require('rnn.' .. name)
end

-- rnn's own suite: dofile(<rnn checkout>/test/test.lua) defines rnn.test(tests, benchmark, exclude).
return rnn
