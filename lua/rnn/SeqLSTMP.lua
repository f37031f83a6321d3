-- nn.SeqLSTMP(inputSize, hiddenSize, outputSize): a SeqLSTM whose output is projected,
-- h = (o.tanh(c)) weightO with weightO hiddenSize x outputSize (LSTMP, Sak 2014); the recurrence
-- uses the projected h.
local SeqLSTMP, parent = torch.class('nn.SeqLSTMP', 'nn.SeqLSTM')

SeqLSTMP.dpnn_parameters = { 'weight', 'bias', 'weightO' }
SeqLSTMP.dpnn_gradParameters = { 'gradWeight', 'gradBias', 'gradWeightO' }

function SeqLSTMP:__init(inputSize, hiddenSize, outputSize)
  assert(inputSize and hiddenSize and outputSize, "SeqLSTMP: expecting input, hidden and output size")
  self.weightO = torch.Tensor(hiddenSize, outputSize)
  self.gradWeightO = torch.Tensor(hiddenSize, outputSize):zero()
  parent.__init(self, inputSize, hiddenSize, outputSize)
  self.gradHidden = torch.Tensor()
end

function SeqLSTMP:reset(std)
  parent.reset(self, std or 1.0 / math.sqrt(self.hiddensize + self.inputsize))
  self.weightO:normal(0, std or 1.0 / math.sqrt(self.outputsize + self.hiddensize))
  return self
end

function SeqLSTMP:project(hidden, output) output:mm(hidden, self.weightO) end

function SeqLSTMP:projectBackward(t, gradOutput, scale)
  self.gradWeightO:addmm(scale, self.hidden[t]:t(), gradOutput)
  self.gradHidden = self.gradHidden or gradOutput.new()
  return self.gradHidden:resize(gradOutput:size(1), self.hiddensize):mm(gradOutput, self.weightO:t())
end

function SeqLSTMP:parameters()
  return { self.weight, self.bias, self.weightO }, { self.gradWeight, self.gradBias, self.gradWeightO }
end

function SeqLSTMP:accUpdateGradParameters()
  error("SeqLSTMP: accUpdateGradParameters not implemented")
end

function SeqLSTMP:toFastLSTM()
  error("SeqLSTMP: toFastLSTM not supported (FastLSTM has no projection)")
end
