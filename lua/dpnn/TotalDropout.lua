-- Drops the whole input (all of it zeroed, or none) with probability p during training; no
-- rescaling. Evaluation passes the input through, and has no backward.
local TotalDropout, parent = torch.class('nn.TotalDropout', 'nn.Module')

function TotalDropout:__init(p)
  parent.__init(self)
  self.p = p or 0.5
  self.train = true
  if type(self.p) ~= 'number' or self.p >= 1 or self.p < 0 then
    error(('<TotalDropout> illegal percentage, must be 0 <= p < 1, got %s'):format(tostring(self.p)), 2)
  end
end

function TotalDropout:updateOutput(input)
  self.output:resizeAs(input):copy(input)
  if self.train then
    self.noise = torch.bernoulli(1 - self.p)
    self.output:mul(self.noise)
  end
  return self.output
end

function TotalDropout:updateGradInput(input, gradOutput)
  if not self.train then error('nn.TotalDropout: backprop only defined while training', 2) end
  self.gradInput:resizeAs(gradOutput):copy(gradOutput):mul(self.noise)
  return self.gradInput
end

function TotalDropout:__tostring__()
  return ('%s(%f)'):format(torch.type(self), self.p)
end
