-- torch.concat([res,] tensors[, dim]): the tensors side by side along dim (default 1) in res,
-- a new tensor of the type of tensors[index] (default 1) when res is not given.
function torch.concat(result, tensors, dim, index)
  if type(result) == 'table' then -- torch.concat(tensors[, dim, index])
    result, tensors, dim, index = nil, result, tensors, dim
  end
  if type(tensors) ~= 'table' or #tensors == 0 then
    error('torch.concat: expecting a non-empty table of tensors at arg 2', 2)
  end
  dim = dim or 1
  local size
  for i, tensor in ipairs(tensors) do
    if not torch.isTensor(tensor) then
      error('torch.concat: expecting a table of tensors, got ' .. torch.type(tensor)
        .. ' at index ' .. i, 2)
    end
    if not size then
      if dim < 1 or dim > tensor:dim() then
        error(('torch.concat: dim %d out of range for a %dD tensor'):format(dim, tensor:dim()), 2)
      end
      size = tensor:size():totable()
      size[dim] = 0
    end
    if tensor:dim() ~= #size then
      error(('torch.concat: tensor at index %d has %d dims, expecting %d'):format(i, tensor:dim(), #size), 2)
    end
    for j = 1, #size do
      if j == dim then
        size[j] = size[j] + tensor:size(j)
      elseif size[j] ~= tensor:size(j) then
        error(('torch.concat: cannot concat dim %d with different sizes: %d ~= %d for tensor at index %d')
          :format(j, size[j], tensor:size(j), i), 2)
      end
    end
  end
  result = result or tensors[index or 1].new()
  result:resize(torch.LongStorage(size))
  local start = 1
  for _, tensor in ipairs(tensors) do
    result:narrow(dim, start, tensor:size(dim)):copy(tensor)
    start = start + tensor:size(dim)
  end
  return result
end
