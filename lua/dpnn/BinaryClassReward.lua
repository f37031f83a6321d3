-- VRClassReward for one binary output per example: input {probabilities (batch), baseline
-- (batch)}, targets 0/1; an example is right when (p > 0.5) equals its target.
local BinaryClassReward, parent = torch.class('nn.BinaryClassReward', 'nn.VRClassReward')

function BinaryClassReward:_batch(input)
  if input:dim() ~= 1 then
    error(('nn.BinaryClassReward: expecting a vector of probabilities, got %dD'):format(input:dim()), 4)
  end
  self.dpnn_online = false
  return input
end

function BinaryClassReward:_hits(input, target)
  if target:dim() ~= 1 then
    error(('nn.BinaryClassReward: expecting a vector of targets, got %dD'):format(target:dim()), 4)
  end
  self._target = self._target or input.new()
  self._target:resize(target:size()):copy(target)
  return input:gt(0.5):typeAs(input):eq(self._target)
end
