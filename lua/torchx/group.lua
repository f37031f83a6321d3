-- torch.group([sorted, index,] tensor[, samegrp, desc]): sorts a vector (into sorted and index),
-- then splits it into runs whose values samegrp(firstValueOfRun, value) accepts (default: equal).
-- Returns {[firstValue] = {idx = index slice, val = sorted slice}}, sorted, index.
local function same(first, val) return first == val end

function torch.group(sorted, index, tensor, samegrp, desc)
  if not torch.isTensor(tensor) then -- torch.group(tensor[, samegrp, desc])
    sorted, index, tensor, samegrp, desc = nil, nil, sorted, index, tensor
  end
  if not torch.isTensor(tensor) or tensor:dim() ~= 1 then
    error('torch.group: expecting a vector to group, got ' .. (torch.isTensor(tensor)
      and (tensor:dim() .. 'D tensor') or torch.type(tensor)), 2)
  end
  sorted = sorted or tensor.new()
  if torch.type(sorted) ~= torch.type(tensor) then
    error('torch.group: expecting sorted (arg 1) of the type of tensor: ' .. torch.type(tensor)
      .. ', got ' .. torch.type(sorted), 2)
  end
  index = index or torch.LongTensor()
  if torch.type(index) ~= 'torch.LongTensor' then
    error('torch.group: expecting a torch.LongTensor index at arg 2, got ' .. torch.type(index), 2)
  end
  samegrp = samegrp or same
  if type(samegrp) ~= 'function' then
    error('torch.group: expecting a function samegrp, got ' .. torch.type(samegrp), 2)
  end
  sorted:sort(index, tensor, desc or false)

  local groups, values = {}, sorted:totable()
  local start = 1
  for i = 2, #values + 1 do
    if i > #values or not samegrp(values[start], values[i]) then
      groups[values[start]] = { idx = index:narrow(1, start, i - start),
                                val = sorted:narrow(1, start, i - start) }
      start = i
    end
  end
  return groups, sorted, index
end
