-- Balances the class distribution of a batch x nClass input of probabilities: each column is
-- divided by that class's share of the probability mass over the last nBatch batches (a rolling
-- cache), and each row is then renormalised to sum to one. Evaluation mode passes input through.
local Balance, parent = torch.class('nn.Balance', 'nn.Module')

function Balance:__init(nBatch)
  parent.__init(self)
  self.nBatch = nBatch or 10
  self.inputCache = torch.Tensor()
  self.prob = torch.Tensor()
  self.sum = torch.Tensor()
  self.batchSize = 0
  self.startIdx = 1
  self.train = true
end

function Balance:updateOutput(input)
  if input:dim() ~= 2 then
    error(('nn.Balance: only works with 2D inputs (batches), got size [%s]')
      :format(table.concat(input:size():totable(), 'x')), 2)
  end
  local B, K = input:size(1), input:size(2)
  if self.batchSize ~= B then
    self.inputCache:resize(B * self.nBatch, K):zero()
    self.batchSize, self.startIdx = B, 1
  end
  self.output:resizeAs(input):copy(input)
  if not self.train then return self.output end
  self.inputCache:narrow(1, self.startIdx, B):copy(input)
  self.prob:sum(self.inputCache, 1):div(self.prob:sum())
  self.output:cdiv(self.prob:expandAs(input))
  self.sum:sum(self.output, 2)
  self.output:cdiv(self.sum:expandAs(input))
  self.startIdx = self.startIdx + B
  if self.startIdx > self.inputCache:size(1) then self.startIdx = 1 end
  return self.output
end

-- As nnx: the row sums and class shares are treated as constants.
function Balance:updateGradInput(input, gradOutput)
  self.gradInput:resizeAs(gradOutput):copy(gradOutput)
  if not self.train then return self.gradInput end
  self.gradInput:cdiv(self.sum:expandAs(input)):cdiv(self.prob:expandAs(input))
  return self.gradInput
end
