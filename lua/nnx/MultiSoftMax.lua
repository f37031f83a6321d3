-- SoftMax over the last dim of a 2D input, or of each of the nSoftmax rows of a
-- batch x nSoftmax x size input (several softmaxes side by side).
local MultiSoftMax, parent = torch.class('nn.MultiSoftMax', 'nn.Module')

function MultiSoftMax:__init()
  parent.__init(self)
  self._softmax = nn.SoftMax()
end

local function rows(module, t)
  if t:dim() == 2 then return t end
  if t:dim() ~= 3 then
    error(('nn.MultiSoftMax: only supports 2D or 3D inputs, got size [%s]')
      :format(table.concat(t:size():totable(), 'x')), 3)
  end
  return t:contiguous():view(t:size(1) * t:size(2), t:size(3))
end

function MultiSoftMax:updateOutput(input)
  self.output = self._softmax:updateOutput(rows(self, input)):view(input:size())
  return self.output
end

function MultiSoftMax:updateGradInput(input, gradOutput)
  self.gradInput = self._softmax:updateGradInput(rows(self, input), rows(self, gradOutput))
    :view(input:size())
  return self.gradInput
end
