-- Base of the modules that take a whole sequence per forward. remember(mode) says when the
-- hidden state carries over between sequences: 'both', 'train', 'eval' or 'neither'.
local AbstractSequencer, parent = torch.class('nn.AbstractSequencer', 'nn.Container')

local rememberModes = { both = { train = true, eval = true }, train = { train = true },
  eval = { eval = true }, neither = {} }

function AbstractSequencer:getStepModule()
  error("DEPRECATED 27 Oct 2015. Wrap your internal modules into a Recursor instead")
end

-- Sequencers are not cloned per step: stepClone is a plain sharedClone.
function AbstractSequencer:sharedClone(shareParams, shareGradParams, clones, pointers)
  return parent.sharedClone(self, shareParams, shareGradParams, clones, pointers)
end

function AbstractSequencer:maxBPTTstep() end

function AbstractSequencer:remember(remember)
  self._remember = remember == nil and 'both' or remember
  assert(rememberModes[self._remember], "AbstractSequencer : unrecognized value for remember : " .. tostring(self._remember))
  return self
end

function AbstractSequencer:hasMemory()
  return rememberModes[self._remember or 'neither'][self.train == false and 'eval' or 'train'] == true
end
