-- rnn's nn.Dropout(p, v1, inplace, lazy, mono): with `lazy`, the noise is drawn again only after
-- a backward, so every step of a sequence shares one mask (Bayesian RNNs, Gal 2015); with `mono`,
-- one mask row serves the whole batch (TrimZero). As in rnn, argument 4 means lazy, not
-- nn's stochasticInference, once rnn is loaded.
local Dropout = nn.Dropout
local nnInit = Dropout.__init
local nnUpdateGradInput = Dropout.updateGradInput
local nnClearState = Dropout.clearState

function Dropout:__init(p, v1, inplace, lazy, mono)
  nnInit(self, p, v1, inplace, false)
  self.lazy = lazy or false
  self.mono = mono or false
  self.flag = true -- true while a new mask is due
end

function Dropout:updateOutput(input)
  if self.inplace then self.output:set(input) else self.output:resizeAs(input):copy(input) end
  if self.p == 0 then return self.output end
  if self.train or self.stochastic_inference then
    if not self.lazy or self.flag ~= false then
      local size = input:size()
      if self.mono then size[1] = 1 end
      self.noise:resize(size):bernoulli(1 - self.p)
      if self.v2 then self.noise:div(1 - self.p) end
      self.flag = false
    end
    if self.mono and self.noise:size(1) ~= input:size(1) then
      self.noise = self.noise:narrow(1, 1, 1):expandAs(input)
    end
    self.output:cmul(self.noise)
  elseif not self.v2 then
    self.output:mul(1 - self.p)
  end
  return self.output
end

function Dropout:updateGradInput(input, gradOutput)
  if self.lazy then self.flag = true end
  return nnUpdateGradInput(self, input, gradOutput)
end

function Dropout:__tostring__()
  return ('%s(%.1f, %s)'):format(torch.type(self), self.p, self.lazy and 'lazy' or 'busy')
end

function Dropout:clearState()
  self.flag = true
  return nnClearState(self)
end
