-- Identity that prints the size of what goes through it (prefix:input on forward,
-- prefix:gradOutput on backward): a debugging aid to put between layers.
local PrintSize, parent = torch.class('nn.PrintSize', 'nn.Module')

function PrintSize:__init(prefix)
  parent.__init(self)
  if prefix ~= nil and type(prefix) ~= 'string' and type(prefix) ~= 'number' then
    error(('nn.PrintSize: prefix must be a string, got %s'):format(torch.type(prefix)), 2)
  end
  self.prefix = prefix or 'PrintSize'
end

-- A tensor's size; a table as itself; nil as 'missing size'.
local function sizeOf(x)
  if x == nil then return 'missing size' end
  if torch.type(x) == 'table' then return x end
  return x:size()
end

function PrintSize:updateOutput(input)
  print(self.prefix .. ':input\n', sizeOf(input))
  self.output = input
  return self.output
end

function PrintSize:updateGradInput(input, gradOutput)
  print(self.prefix .. ':gradOutput\n', sizeOf(gradOutput))
  self.gradInput = gradOutput
  return self.gradInput
end
