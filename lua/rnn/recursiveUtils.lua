-- rnn.recursive*: element-wise helpers over tensors nested in tables (hidden states, gradients).
-- They are torchx's (rnn requires torchx, as upstream): one implementation under both names.
local rnn = rnn

for _, name in ipairs({ 'recursiveResizeAs', 'recursiveSet', 'recursiveCopy', 'recursiveAdd',
                        'recursiveNormal', 'recursiveFill', 'recursiveTensorEq', 'recursiveType',
                        'recursiveSum', 'recursiveNew' }) do
  rnn[name] = torchx[name]
end
