-- The output layer of noise-contrastive estimation (for nn.NCECriterion): a Linear whose
-- exp(score) / Z is computed only for each example's target and k noise samples drawn from
-- the unigram distribution. Input {input (batch x inputSize), target (batch)}; output
-- {Pmt (batch), Pms (batch x k), Pnt (batch), Pns (batch x k)}: the model's (unnormalised, / Z)
-- and the noise's probabilities of the targets and the samples. With batchnoise (default) one
-- set of k samples serves the whole batch. Z <= 0 is estimated from the first batch. In
-- evaluation with normalized = true, the output is the full SoftMax (LogSoftMax with
-- logsoftmax = true) over all outputSize scores.
local _ = require 'moses'
require 'dpnn.AliasMultinomial'
local NCEModule, parent = torch.class('nn.NCEModule', 'nn.Linear')
NCEModule.version = 6

NCEModule.dpnn_mediumEmpty = _.append(nn.Module.dpnn_mediumEmpty,
  { 'sampleidx', 'sampleprob', '_noiseidx', '_noiseprob', '_weight', '_gradWeight', '_gradOutput', '_tgradOutput' })
NCEModule.dpnn_parameters = _.append(nn.Module.dpnn_parameters, { 'unigrams', 'Z' })

function NCEModule:__init(inputSize, outputSize, k, unigrams, Z)
  parent.__init(self, inputSize, outputSize)
  if type(k) ~= 'number' then error('nn.NCEModule: k (the number of noise samples) should be a number, got ' .. torch.type(k), 2) end
  if not torch.isTensor(unigrams) or unigrams:nElement() ~= outputSize then
    error(('nn.NCEModule: unigrams should be a tensor of outputSize (%d) counts or probabilities'):format(outputSize), 2)
  end
  self.k = k
  self.unigrams = unigrams
  self.Z = torch.Tensor { Z or -1 }
  self.batchnoise = true
  self:fastNoise()
  self.output = { torch.Tensor(), torch.Tensor(), torch.Tensor(), torch.Tensor() }
  self.gradInput = { torch.Tensor(), torch.Tensor() }
end

function NCEModule:reset(stdv)
  if stdv then
    self.weight:uniform(-stdv, stdv)
    self.bias:uniform(-stdv, stdv)
  else
    self.weight:uniform(-1 / math.sqrt(self.weight:size(2)), 1 / math.sqrt(self.weight:size(2)))
    self.bias:fill(-math.log(self.bias:size(1)))   -- log of a uniform distribution's probability
  end
  return self
end

-- Normalises the unigrams in place and builds the alias sampler over them.
function NCEModule:fastNoise()
  self.unigrams:div(self.unigrams:sum())
  self.aliasmultinomial = torch.AliasMultinomial(self.unigrams)
  self.aliasmultinomial.dpnn_parameters = { 'J', 'q' }
end

-- Fills sampleidx (resized to batchsize x k) with noise samples.
function NCEModule:noiseSample(sampleidx, batchsize, k)
  if torch.type(sampleidx) == 'torch.LongTensor' then
    return self.aliasmultinomial:batchdraw(sampleidx:resize(batchsize, k))
  end
  self._noiseidx = self._noiseidx or torch.LongTensor()
  self.aliasmultinomial:batchdraw(self._noiseidx:resize(batchsize, k))
  return sampleidx:resize(batchsize, k):copy(self._noiseidx)
end

-- The noise probabilities of sampleidx's indices, in sampleprob (sampleidx's size).
function NCEModule:noiseProb(sampleprob, sampleidx)
  self._noiseidx = self._noiseidx or torch.LongTensor()
  self._noiseidx:resize(sampleidx:size()):copy(sampleidx)
  self._noiseprob = self._noiseprob or self.unigrams.new()
  self._noiseprob:index(self.unigrams, 1, self._noiseidx:view(-1))
  return sampleprob:resize(sampleidx:size()):copy(self._noiseprob)
end

local function checkInput(self, input)
  if torch.type(input) ~= 'table' or #input < 2 then error('nn.NCEModule: expecting the input {input, target}', 3) end
  local x, target = input[1], input[2]
  if x:dim() ~= 2 or target:dim() ~= 1 or x:size(1) ~= target:size(1) or x:size(2) ~= self.weight:size(2) then
    error(('nn.NCEModule: expecting input batch x %d and target batch, got %s and %s'):format(self.weight:size(2),
      table.concat(x:size():totable(), 'x'), table.concat(target:size():totable(), 'x')), 3)
  end
  return x, target, x:size(1)
end

-- Divides the exponentiated scores by Z, estimating Z from them first when it is unset.
function NCEModule:_normalize(expScores, ...)
  if self.Z[1] <= 0 then
    self.Z[1] = expScores:mean() * self.weight:size(1)
    print('normalization constant Z approximated to ' .. self.Z[1])
  end
  expScores:div(self.Z[1])
  for _, t in ipairs({ ... }) do t:div(self.Z[1]) end
end

function NCEModule:_fullOutput(input)
  self.linout = self.linout or input.new()
  self.linout:resize(input:size(1), self.weight:size(1)):mm(input, self.weight:t())
  self.linout:add(self.bias:view(1, -1):expandAs(self.linout))
  self.output = torch.isTensor(self.output) and self.output or input.new()
  local f = self.logsoftmax and nn.LogSoftMax or nn.SoftMax
  self._softmax = (torch.type(self._softmax) == torch.type(f())) and self._softmax or f()
  self.output:resizeAs(self.linout):copy(self._softmax:updateOutput(self.linout))
  return self.output
end

function NCEModule:updateOutput(input)
  local x, target, batchsize = checkInput(self, input)
  if self.train == false and self.normalized then return self:_fullOutput(x) end
  if not (torch.type(self.output) == 'table' and #self.output == 4) then
    self.output = { x.new(), x.new(), x.new(), x.new() }
  end
  local k, inputSize = self.k, self.weight:size(2)
  self.sampleprob = self.sampleprob or x.new()
  if self.batchnoise then
    -- sampleidx: the k shared noise samples, then the batch's targets
    self.sampleidx = self.sampleidx or torch.LongTensor()
    self.sampleidx:resize(k + batchsize)
    self._batchnoise = self._batchnoise or torch.LongTensor()
    self.sampleidx:narrow(1, 1, k):copy(self:noiseSample(self._batchnoise, 1, k):view(k))
    self.sampleidx:narrow(1, k + 1, batchsize):copy(target)
    self._weight = self._weight or self.weight.new()
    self._weight:index(self.weight, 1, self.sampleidx)
    self._bias = self._bias or self.bias.new()
    self._bias:index(self.bias, 1, self.sampleidx)
    local sweight, tweight = self._weight:narrow(1, 1, k), self._weight:narrow(1, k + 1, batchsize)
    local Pmt, Pms = self.output[1], self.output[2]
    self._pm = self._pm or x.new()
    Pmt:sum(self._pm:cmul(x, tweight), 2):resize(batchsize):add(self._bias:narrow(1, k + 1, batchsize)):exp()
    Pms:resize(batchsize, k):copy(self._bias:narrow(1, 1, k):view(1, k):expand(batchsize, k))
    Pms:addmm(1, Pms, 1, x, sweight:t()):exp()
    self:_normalize(Pms, Pmt)
    self:noiseProb(self.sampleprob, self.sampleidx)
    self.output[3]:set(self.sampleprob:narrow(1, k + 1, batchsize))
    self.output[4]:set(self.sampleprob:narrow(1, 1, k):view(1, k):expand(batchsize, k))
  else
    -- sampleidx: batch x (1 + k), each row its target then its own noise samples
    self.sampleidx = self.sampleidx or torch.LongTensor()
    self.sampleidx:resize(batchsize, k + 1)
    self.sampleidx:select(2, 1):copy(target)
    self._sampleidx = self._sampleidx or torch.LongTensor()
    self.sampleidx:narrow(2, 2, k):copy(self:noiseSample(self._sampleidx, batchsize, k))
    local flat = self.sampleidx:view(-1)
    self._weight = self._weight or self.weight.new()
    self._weight:index(self.weight, 1, flat):resize(batchsize, k + 1, inputSize)
    self._bias = self._bias or self.bias.new()
    self._bias:index(self.bias, 1, flat)
    self._pm = self._pm or x.new()
    self._pm:resize(batchsize, 1, k + 1):copy(self._bias:view(batchsize, 1, k + 1))
    self._pm:baddbmm(1, self._pm, 1, x:view(batchsize, 1, inputSize), self._weight:transpose(2, 3))
    self._pm:resize(batchsize, k + 1):exp()
    self:_normalize(self._pm)
    self.output[1]:set(self._pm:select(2, 1))
    self.output[2]:set(self._pm:narrow(2, 2, k))
    self:noiseProb(self.sampleprob, self.sampleidx)
    self.output[3]:set(self.sampleprob:select(2, 1))
    self.output[4]:set(self.sampleprob:narrow(2, 2, k))
  end
  return self.output
end

-- gradOutput times the probabilities: the gradients with respect to the scores (d exp = exp).
function NCEModule:_scoreGradients(gradOutput, batchsize)
  local k = self.k
  self._gradOutput = self._gradOutput or gradOutput[1].new()
  if self.batchnoise then
    self._tgradOutput = self._tgradOutput or gradOutput[1].new()
    self._tgradOutput:cmul(gradOutput[1], self.output[1])
    self._gradOutput:cmul(gradOutput[2], self.output[2])
    return self._tgradOutput, self._gradOutput
  end
  self._gradOutput:resize(batchsize, k + 1)
  self._gradOutput:select(2, 1):copy(gradOutput[1])
  self._gradOutput:narrow(2, 2, k):copy(gradOutput[2])
  return self._gradOutput:cmul(self._pm)
end

function NCEModule:updateGradInput(input, gradOutput)
  local x, target, batchsize = checkInput(self, input)
  local k, inputSize = self.k, self.weight:size(2)
  local gradInput = self.gradInput[1]
  if self.batchnoise then
    local gt, gs = self:_scoreGradients(gradOutput, batchsize)
    local tweight = self._weight:narrow(1, k + 1, batchsize)
    gradInput:cmul(gt:view(batchsize, 1):expandAs(tweight), tweight)
    gradInput:addmm(1, 1, gs, self._weight:narrow(1, 1, k))
  else
    local g = self:_scoreGradients(gradOutput, batchsize)
    gradInput:resize(batchsize, 1, inputSize):zero()
    gradInput:baddbmm(0, 1, g:view(batchsize, 1, k + 1), self._weight)
    gradInput:resizeAs(x)
  end
  if self.gradInput[2]:nElement() ~= target:nElement() then self.gradInput[2]:resize(target:size()):zero() end
  return self.gradInput
end

function NCEModule:accGradParameters(input, gradOutput, scale)
  local x, _, batchsize = checkInput(self, input)
  local k, inputSize = self.k, self.weight:size(2)
  scale = scale or 1
  self._gradWeight = self._gradWeight or self.weight.new()
  if self.batchnoise then
    local gt, gs = self:_scoreGradients(gradOutput, batchsize)
    self._gradWeight:resize(k + batchsize, inputSize)
    self._gradWeight:narrow(1, 1, k):mm(gs:t(), x):mul(scale)
    self._gradWeight:narrow(1, k + 1, batchsize):cmul(gt:view(batchsize, 1):expandAs(x), x):mul(scale)
    self.gradWeight:indexAdd(1, self.sampleidx, self._gradWeight)
    self.gradBias:indexAdd(1, self.sampleidx:narrow(1, k + 1, batchsize), torch.mul(gt, scale))
    self.gradBias:indexAdd(1, self.sampleidx:narrow(1, 1, k), gs:sum(1):view(k):mul(scale))
  else
    local g = self:_scoreGradients(gradOutput, batchsize):view(batchsize, k + 1, 1)
    self._gradWeight:resize(batchsize, k + 1, inputSize):bmm(g, x:view(batchsize, 1, inputSize)):mul(scale)
    local flat = self.sampleidx:view(-1)
    self.gradWeight:indexAdd(1, flat, self._gradWeight:view(-1, inputSize))
    self.gradBias:indexAdd(1, flat, torch.mul(g:view(-1), scale))
  end
end

-- The unigrams and the sampler stay as they are (the sampler's draws are CPU longs).
function NCEModule:type(name, tensorCache)
  if name then
    self.sampleidx, self.sampleprob, self._noiseidx, self._noiseprob = nil, nil, nil, nil
    self._gradOutput, self._tgradOutput, self._gradWeight, self._weight = nil, nil, nil, nil
  end
  local unigrams, sampler = self.unigrams, self.aliasmultinomial
  self.unigrams, self.aliasmultinomial = nil, nil
  local result = parent.type(self, name, tensorCache)
  self.unigrams, self.aliasmultinomial = unigrams, sampler
  return result
end

function NCEModule:clearState()
  self.sampleidx, self.sampleprob, self._noiseidx, self._noiseprob = nil, nil, nil, nil
  self._gradOutput, self._tgradOutput = nil, nil
  if torch.isTensor(self.output) then
    self.output:set()
  else
    for _, t in ipairs(self.output) do t:set() end
  end
  for _, t in ipairs(self.gradInput) do t:set() end
  return self
end
