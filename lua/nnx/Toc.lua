-- Identity that prints the seconds since the Tic of the same name last ran forward.
local Toc, parent = torch.class('nn.Toc', 'nn.Module')

function Toc:__init(name, comment)
  parent.__init(self)
  self.name = name or 'default'
  self.comment = comment or ''
end

function Toc:updateOutput(input)
  local timer = tic_modules and tic_modules[self.name]
  if not timer then error(("nn.Toc: no nn.Tic named '%s'"):format(self.name), 2) end
  print(("Toc '%s' (%s) : %s"):format(self.name, self.comment, tostring(timer:time().real)))
  self.output = input
  return self.output
end

function Toc:updateGradInput(input, gradOutput)
  self.gradInput = gradOutput
  return self.gradInput
end
