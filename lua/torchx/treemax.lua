-- torch.treemax(vector, treeSize): descends a tree whose level i splits the current span into
-- treeSize[i] equal children, following the child of greatest mean (at the last level, the
-- greatest value). Returns that value and its index in vector (first one on ties).
local buffers = {} -- per tensor type: means, best value, best index, contiguous copy

function torch.treemax(tensor, treeSize)
  if type(treeSize) ~= 'table' then
    error('torch.treemax: expecting a table of level sizes at arg 2, got ' .. torch.type(treeSize), 2)
  end
  if not torch.isTensor(tensor) or tensor:dim() ~= 1 then
    error('torch.treemax: expecting a vector at arg 1', 2)
  end
  local leaves = 1
  for _, n in ipairs(treeSize) do leaves = leaves * n end
  if leaves ~= tensor:nElement() then
    error(('torch.treemax: tree of %d leaves for a vector of %d elements')
      :format(leaves, tensor:nElement()), 2)
  end
  local buf = buffers[torch.type(tensor)]
  if not buf then
    buf = { mean = tensor.new(), max = tensor.new(), idx = torch.LongTensor(), copy = tensor.new() }
    buffers[torch.type(tensor)] = buf
  end
  if not tensor:isContiguous() then tensor = buf.copy:resizeAs(tensor):copy(tensor) end

  local span, maxVal, maxIdx = tensor, 0, 1
  for level, n in ipairs(treeSize) do
    local children = span:view(n, -1)
    local scores = children:select(2, 1)
    if level < #treeSize then scores = buf.mean:mean(children, 2):select(2, 1) end
    buf.max:max(buf.idx, scores, 1)
    local best = buf.idx[1]
    maxVal = buf.max[1]
    maxIdx = maxIdx + (best - 1) * children:size(2)
    span = children[best]
  end
  return maxVal, maxIdx
end
