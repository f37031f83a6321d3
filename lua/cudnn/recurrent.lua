-- The recurrent layers cudnn.torch names: cudnn.RNN (see RNN.lua) in one mode, with one or
-- two directions (BLSTM and BGRU take no rememberStates, as in cudnn.torch).
local kinds = {
  RNNReLU = { 'CUDNN_RNN_RELU', 1 }, RNNTanh = { 'CUDNN_RNN_TANH', 1 },
  LSTM = { 'CUDNN_LSTM', 1 }, GRU = { 'CUDNN_GRU', 1 },
  BLSTM = { 'CUDNN_LSTM', 2 }, BGRU = { 'CUDNN_GRU', 2 },
}

for name, kind in pairs(kinds) do
  local mode, numDirections = kind[1], kind[2]
  local class, parent = torch.class('cudnn.' .. name, 'cudnn.RNN')
  function class:__init(inputSize, hiddenSize, numLayers, batchFirst, dropout, rememberStates)
    if numDirections == 2 then rememberStates = nil end
    parent.__init(self, inputSize, hiddenSize, numLayers, batchFirst, dropout, rememberStates)
    self.mode, self.numDirections = mode, numDirections
    self.bidirectional = numDirections == 2 and 'CUDNN_BIDIRECTIONAL' or 'CUDNN_UNIDIRECTIONAL'
    self:reset()
  end
end
