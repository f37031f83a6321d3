-- Shapes shared by nnx's spatial modules: an input seen as N x H x W x M around its (yDim, xDim)
-- pair (N: the product of the dims before, M: of the dims after), and the input's size with
-- new image sizes.
local planes = {}

function planes.around(module, input, yDim, xDim)
  if input:dim() < xDim then
    error(('%s: expected an input with at least %d dimensions (y dim %d, x dim %d), got size [%s]')
      :format(torch.type(module), xDim, yDim, xDim, table.concat(input:size():totable(), 'x')), 3)
  end
  local N, M = 1, 1
  for d = 1, yDim - 1 do N = N * input:size(d) end
  for d = xDim + 1, input:dim() do M = M * input:size(d) end
  return N, input:size(yDim), input:size(xDim), M
end

function planes.resized(input, yDim, xDim, H, W)
  local size = input:size()
  size[yDim], size[xDim] = H, W
  return size
end

-- The index of a dim whose name is y/x in a constructor: integers, y just before x.
function planes.checkDims(name, yDim, xDim)
  if yDim % 1 ~= 0 or xDim % 1 ~= 0 or yDim < 1 or yDim + 1 ~= xDim then
    error(('%s: yDim must be a positive integer equal to xDim-1 (got yDim=%s, xDim=%s)')
      :format(name, tostring(yDim), tostring(xDim)), 3)
  end
end

return planes
