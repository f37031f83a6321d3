-- Helpers shared by the modules and criterions that take a whole sequence: a tensor whose first
-- dimension is time, or a table with one entry per step.
local sequence = {}

-- The number of steps of `input`; `other` (gradOutput or target), when given, must match it.
function sequence.length(owner, input, other, otherName)
  local n
  if torch.isTensor(input) then
    n = input:size(1)
    if other ~= nil then
      if not torch.isTensor(other) then
        error(('%s: expecting %s Tensor since input is a Tensor, got %s'):format(owner, otherName, torch.type(other)), 3)
      end
      if other:size(1) ~= n then
        error(('%s: %s should have as many elements as input (%d steps, got %d)'):format(owner, otherName, n, other:size(1)), 3)
      end
    end
  elseif torch.type(input) == 'table' then
    n = #input
    if other ~= nil then
      if torch.type(other) ~= 'table' then
        error(('%s: expecting %s table, got %s'):format(owner, otherName, torch.type(other)), 3)
      end
      if #other ~= n then
        error(('%s: %s should have as many elements as input (%d steps, got %d)'):format(owner, otherName, n, #other), 3)
      end
    end
  else
    error(('%s: expecting a Tensor or a table of steps, got %s'):format(owner, torch.type(input)), 3)
  end
  return n
end

-- Copies the equally sized tensors steps[1..n] into `into` (a tensor, reused when it is one)
-- as its first dimension.
function sequence.stack(into, steps, n)
  local first = steps[1]
  into = torch.isTensor(into) and into or first.new()
  local size = first:size():totable()
  table.insert(size, 1, n)
  into:resize(torch.LongStorage(size))
  for step = 1, n do into[step]:copy(steps[step]) end
  return into
end

return sequence
