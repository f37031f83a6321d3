-- nn.LinearRNN(inputsize, outputsize[, transfer]): torch/rnn's (v2) simple RNN layer, a Recurrence
-- whose step maps {x[t], h[t-1]} to h[t] = transfer(W [x[t]; h[t-1]] + b): the two are joined
-- along their last dimension and go through one Linear(inputsize + outputsize -> outputsize), then
-- transfer (default nn.Sigmoid). h[0] is zero; inputs are one sample (1D) or a batch (2D).
local LinearRNN, parent = torch.class('nn.LinearRNN', 'nn.Recurrence')

function LinearRNN:__init(inputsize, outputsize, transfer)
  assert(type(inputsize) == 'number' and type(outputsize) == 'number',
    'nn.LinearRNN(inputsize, outputsize[, transfer]): sizes must be numbers')
  local step = nn.Sequential()
  step:add(nn.JoinTable(1, 1))
  step:add(nn.Linear(inputsize + outputsize, outputsize))
  step:add(transfer or nn.Sigmoid())
  parent.__init(self, step, outputsize, 1)
  self.inputsize, self.outputsize = inputsize, outputsize
end

function LinearRNN:__tostring__()
  return ('%s(%d -> %d)'):format(torch.type(self), self.inputsize, self.outputsize)
end
