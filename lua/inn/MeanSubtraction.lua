-- inn.MeanSubtraction(mean): input - mean, mean a C x H x W image (or 1 x C x H x W) expanded over
-- the batch; the gradient passes through unchanged.
require 'inn.env'
local MeanSubtraction, parent = torch.class('inn.MeanSubtraction', 'nn.Module')

function MeanSubtraction:__init(mean)
  parent.__init(self)
  if not torch.isTensor(mean) then
    error('inn.MeanSubtraction: a mean tensor expected, got ' .. torch.type(mean), 2)
  end
  self.mean = mean
end

function MeanSubtraction:updateOutput(input)
  local m = self.mean
  if m:dim() == 4 then m = m[1] end
  if input:dim() == 4 then
    if m:nElement() ~= input[1]:nElement() then
      error(('inn.MeanSubtraction: the mean has %d elements, a sample of the input (%s) %d'):format(
        m:nElement(), table.concat(input:size():totable(), 'x'), input[1]:nElement()), 2)
    end
    m = m:contiguous():view(1, input:size(2), input:size(3), input:size(4)):expandAs(input)
  elseif input:dim() == 3 then
    if m:nElement() ~= input:nElement() then
      error(('inn.MeanSubtraction: the mean has %d elements, the input (%s) %d'):format(
        m:nElement(), table.concat(input:size():totable(), 'x'), input:nElement()), 2)
    end
    m = m:contiguous():viewAs(input)
  else
    error('inn.MeanSubtraction: a 3-D or 4-D input expected, got ' .. input:dim() .. '-D', 2)
  end
  self.output:resizeAs(input):copy(input):add(-1, m:typeAs(input))
  return self.output
end

function MeanSubtraction:updateGradInput(input, gradOutput)
  self.gradInput = gradOutput
  return self.gradInput
end
