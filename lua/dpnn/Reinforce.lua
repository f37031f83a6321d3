-- Base of the REINFORCE modules (Williams, 1992): forward samples from a distribution whose
-- parameters are the input; backward ignores gradOutput and returns -reward * d log p(sample) /
-- d input, the reward (one per example) having been given by reinforce(reward), usually by a
-- criterion such as nn.VRClassReward. Sampling happens in training (or with stochastic = true);
-- evaluation outputs the distribution's mode/mean.
local Reinforce, parent = torch.class('nn.Reinforce', 'nn.Module')

function Reinforce:__init(stochastic)
  parent.__init(self)
  self.stochastic = stochastic
end

function Reinforce:reinforce(reward)
  parent.reinforce(self, reward)
  self.reward = reward
end

function Reinforce:_sampling()
  return self.stochastic or self.train ~= false
end

function Reinforce:updateOutput(input)
  self.output:set(input)
  return self.output
end

function Reinforce:updateGradInput(input, gradOutput)
  local reward = self:rewardAs(input)
  self.gradInput:resizeAs(reward):copy(reward)
  return self.gradInput
end

-- The reward (a vector, one per example) viewed and expanded to the size of input.
function Reinforce:rewardAs(input)
  local reward = self.reward
  if not torch.isTensor(reward) then
    error(torch.type(self) .. ': no reward: call reinforce(reward) before backward', 3)
  end
  if reward:dim() ~= 1 then
    error(('%s: the reward should be a vector (one per example), got %dD'):format(torch.type(self), reward:dim()), 3)
  end
  if input:isSameSizeAs(reward) then return reward end
  local given = input
  -- a reward per first-dimension slice, or one reward for an input without batch dimension
  if reward:size(1) ~= input:size(1) then input = self:toBatch(input, input:dim()) end
  if reward:size(1) ~= input:size(1) then
    error(('%s: %d rewards for an input of size %s'):format(torch.type(self), reward:size(1),
      table.concat(given:size():totable(), 'x')), 3)
  end
  local shape = input:size():fill(1):totable()
  shape[1] = reward:size(1)
  self._reward = self._reward or reward.new()
  self._reward:view(reward, table.unpack(shape))
  self.__reward = self.__reward or reward.new()
  self.__reward:expandAs(self._reward, input)
  return self.__reward
end
