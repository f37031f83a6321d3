-- nn.Module additions rnn relies on: memory control (forget/remember), step clones, BPTT length,
-- hidden states. Containers pass each call on to their children; leaf modules do nothing.
local Module = nn.Module

local function eachChild(self, method, ...)
  for _, module in ipairs(self.modules or {}) do module[method](module, ...) end
end

-- Forgets past time-steps (AbstractRecurrent instances start a new sequence).
function Module:forget() eachChild(self, 'forget'); return self end
-- remember: 'both', 'train', 'eval' or 'neither' (Sequencers).
function Module:remember(remember) eachChild(self, 'remember', remember); return self end
function Module:setOutputStep(step) eachChild(self, 'setOutputStep', step) end
-- Caps the number of time-steps back-propagated through.
function Module:maxBPTTstep(rho) eachChild(self, 'maxBPTTstep', rho) end

function Module:stepClone(shareParams, shareGradParams)
  return self:sharedClone(shareParams, shareGradParams, true)
end

function Module:backwardOnline()
  print("Deprecated Jan 6, 2016. By default rnn now uses backwardOnline, so no need to call this method")
end

-- Hidden states of containers are tables with one entry per child.
local function gatherChildren(self, method, step)
  if not self.modules then return nil end
  local states = {}
  for i, module in ipairs(self.modules) do states[i] = module[method](module, step) end
  return states
end

local function scatterChildren(self, method, step, states)
  if not self.modules then return end
  if torch.type(states) ~= 'table' then
    error(('%s:%s expects a table of states, one per child, got %s'):format(torch.type(self), method, torch.type(states)), 3)
  end
  for i, module in ipairs(self.modules) do module[method](module, step, states[i]) end
end

function Module:getHiddenState(step) return gatherChildren(self, 'getHiddenState', step) end
function Module:setHiddenState(step, state) scatterChildren(self, 'setHiddenState', step, state) end
function Module:getGradHiddenState(step) return gatherChildren(self, 'getGradHiddenState', step) end
function Module:setGradHiddenState(step, state) scatterChildren(self, 'setGradHiddenState', step, state) end
