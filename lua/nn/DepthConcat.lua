-- Concat whose children's outputs may differ in the other dimensions (as the branches of an
-- Inception block): the joined output takes the largest size in each and every output is
-- centred in its window, the rest being zeros.
local DepthConcat = torch.class('nn.DepthConcat', 'nn.Concat')

function DepthConcat:_growOutputSize(i, out)
  local size, dim = self.outputSize, self.dimension
  if i == 1 then
    self.outputSize:resize(out:dim()):copy(out:size())
    return
  end
  if out:dim() ~= #size then
    error(('nn.DepthConcat: output of module %d has %d dimensions, the first one has %d')
      :format(i, out:dim(), #size))
  end
  for d = 1, #size do
    size[d] = d == dim and size[d] + out:size(d) or math.max(size[d], out:size(d))
  end
end

function DepthConcat:_fillPadding() self.output:zero() end

-- Narrows along `dimension`, then centres out's extent in each other dimension
-- (an odd margin puts the extra element after it).
function DepthConcat:windowNarrow(t, out, offset)
  local window = t:narrow(self.dimension, offset, out:size(self.dimension))
  for d = 1, #self.outputSize do
    local full, own = self.outputSize[d], out:size(d)
    if d ~= self.dimension and own ~= full then
      window = window:narrow(d, math.floor((full - own) / 2) + 1, own)
    end
  end
  return window
end
