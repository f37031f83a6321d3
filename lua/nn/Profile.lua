-- Decorator that times its module's forward and backward passes and prints the summed time
-- every print_interval calls.
local check = require 'torch.core.check'
local Profile, parent = torch.class('nn.Profile', 'nn.Decorator')

function Profile:__init(module, print_interval, name)
  parent.__init(self, module)
  self.print_interval = check.optInt('nn.Profile', print_interval, 'print_interval', 1) or 100
  self.name = check.optString('nn.Profile', name, 'name') or torch.type(module)
  self.module = module
  self.numFwds, self.numBwds = 0, 0
  self.summedFwdTime, self.summedBwdTime = 0, 0
  self.timer = torch.Timer()
end

-- Adds the time since the timer's reset to the pass's totals; prints and restarts them
-- every print_interval calls. pass is 'Fwd' or 'Bwd'.
function Profile:_record(pass, label)
  local count, total = 'num' .. pass .. 's', 'summed' .. pass .. 'Time'
  self[total] = self[total] + self.timer:time().real
  self[count] = self[count] + 1
  if self[count] % self.print_interval == 0 then
    print(string.format('%s took %.3f seconds for %d %s passes',
      self.name, self[total], self.print_interval, label))
    self[count], self[total] = 0, 0
  end
end

function Profile:updateOutput(input)
  self.timer:reset()
  self.output = self.module:updateOutput(input)
  self:_record('Fwd', 'forward')
  return self.output
end

function Profile:updateGradInput(input, gradOutput)
  self.timer:reset()
  self.gradInput = self.module:updateGradInput(input, gradOutput)
  self:_record('Bwd', 'backward')
  return self.gradInput
end
