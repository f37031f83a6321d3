-- Identity that prints statistics (size, mean, std, min, max, time since the last probe) of what
-- flows through it, forward and backward; with display, also shows it with image.display.
local Probe, parent = torch.class('nn.Probe', 'nn.Module')

function Probe:__init(name, display)
  parent.__init(self)
  self.name = name or 'unnamed'
  self.display = display
  nn._ProbeTimer = nn._ProbeTimer or torch.Timer()
end

-- Prints the report on t under legend; returns the display window.
function Probe:_report(t, legend, win)
  local now = nn._ProbeTimer:time().real
  local elapsed = now - (nn._ProbeLast or 0)
  nn._ProbeLast = now
  print('')
  print(legend)
  print('  + size = ' .. table.concat(t:size():totable(), 'x'))
  print('  + mean = ' .. t:mean())
  print('  + std = ' .. t:std())
  print('  + min = ' .. t:min())
  print('  + max = ' .. t:max())
  print('  + time since last probe = ' .. string.format('%0.1f', elapsed * 1000) .. 'ms')
  if self.display then
    require 'image'
    return image.display{image = t, win = win, legend = legend}
  end
end

function Probe:updateOutput(input)
  self.output = input
  self.winf = self:_report(input, '<' .. self.name .. '>.output', self.winf)
  return self.output
end

function Probe:updateGradInput(input, gradOutput)
  self.gradInput = gradOutput
  self.winb = self:_report(gradOutput, 'layer<' .. self.name .. '>.gradInput', self.winb)
  return self.gradInput
end
