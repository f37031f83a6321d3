-- nn.SeqBRNN(inputSize, hiddenSize[, batchFirst, merge]): a bidirectional SeqLSTM over a
-- seqlen x batch x inputSize tensor (batch x seqlen x inputSize with batchFirst); merge
-- (default CAddTable) combines the two directions.
local SeqBRNN, parent = torch.class('nn.SeqBRNN', 'nn.Container')

function SeqBRNN:__init(inputSize, hiddenSize, batchFirst, merge)
  parent.__init(self)
  self.forwardModule = nn.SeqLSTM(inputSize, hiddenSize)
  self.backwardModule = nn.SeqLSTM(inputSize, hiddenSize)
  self.merge = merge or nn.CAddTable()
  self.dim = 1
  local backward = nn.Sequential()
    :add(nn.SeqReverseSequence(self.dim))
    :add(self.backwardModule)
    :add(nn.SeqReverseSequence(self.dim))
  local brnn = nn.Sequential()
    :add(nn.ConcatTable():add(self.forwardModule):add(backward))
    :add(self.merge)
  if batchFirst then
    brnn:insert(nn.Transpose({ 1, 2 }), 1)
    brnn:insert(nn.Transpose({ 1, 2 }))
  end
  self.output = torch.Tensor()
  self.gradInput = torch.Tensor()
  self.module = brnn
  self.modules[1] = brnn
end

nn.Decorator.decorate(SeqBRNN)
