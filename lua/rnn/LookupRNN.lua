-- nn.LookupRNN(nindex, outputsize[, transfer[, merge]]): torch/rnn's (v2) RNN over word indices,
-- a Recurrence whose step maps {x[t], h[t-1]} to transfer(merge{L[x[t]], W h[t-1] + b}): L a
-- LookupTableMaskZero(nindex, outputsize) (index 0 gives zeros), W a Linear(outputsize ->
-- outputsize), merge nn.CAddTable and transfer nn.Sigmoid by default. x[t] is one index (a number
-- or a 1-element tensor) or a batch of them (1D LongTensor).
local LookupRNN, parent = torch.class('nn.LookupRNN', 'nn.Recurrence')

function LookupRNN:__init(nindex, outputsize, transfer, merge)
  assert(type(nindex) == 'number' and type(outputsize) == 'number',
    'nn.LookupRNN(nindex, outputsize[, transfer[, merge]]): sizes must be numbers')
  local inputs = nn.ParallelTable()
  inputs:add(nn.LookupTableMaskZero(nindex, outputsize))
  inputs:add(nn.Linear(outputsize, outputsize))
  local step = nn.Sequential()
  step:add(inputs)
  step:add(merge or nn.CAddTable())
  step:add(transfer or nn.Sigmoid())
  parent.__init(self, step, outputsize, 0)
  self.nindex, self.outputsize = nindex, outputsize
end

function LookupRNN:__tostring__()
  return ('%s(%d -> %d)'):format(torch.type(self), self.nindex, self.outputsize)
end
