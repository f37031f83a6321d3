-- torch.find(tensor, val[, dim]): the positions of the elements equal to val, counted in the
-- tensor's row-major order: a table of numbers, or with dim=2 (matrices only) one table of
-- column indices per row. Compares as Lua numbers do (a FloatTensor's 0.6 is not 0.6).
local asDouble = torch.DoubleTensor()

local function positions(mask)
  local found = mask:nonzero()
  return found:nElement() > 0 and found:select(2, 1):totable() or {}
end

function torch.find(tensor, val, dim)
  if not torch.isTensor(tensor) then
    error('torch.find: expecting a tensor at arg 1, got ' .. torch.type(tensor), 2)
  end
  if dim and (dim ~= 2 or tensor:dim() ~= 2) then
    error(('torch.find: dim arg only supports dim=2 of a matrix, got dim=%s of a %dD tensor')
      :format(tostring(dim), tensor:dim()), 2)
  end
  local values = tensor
  if torch.type(tensor) ~= 'torch.DoubleTensor' then
    values = asDouble:resize(tensor:size()):copy(tensor)
  end
  local equal = values:eq(val)
  if not dim then return positions(equal:view(-1)) end
  local rows = {}
  for i = 1, equal:size(1) do rows[i] = positions(equal[i]) end
  return rows
end
