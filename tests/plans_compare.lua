-- The largest difference between a planned run's value and the layer-by-layer one's, relative to
-- the latter's magnitude (at least 1): tensors of the same size, tables of them (recursively), or
-- both nil; math.huge for anything else (a size or kind that differs). The plan tests load it.
local function maxDiff(a, b)
  if torch.type(a) == 'table' or torch.type(b) == 'table' then
    if torch.type(a) ~= 'table' or torch.type(b) ~= 'table' then return math.huge end
    local d = 0
    for i = 1, math.max(#a, #b) do d = math.max(d, maxDiff(a[i], b[i])) end
    return d
  end
  if a == nil and b == nil then return 0 end
  if not torch.isTensor(a) or not torch.isTensor(b) then return math.huge end
  if a:nElement() == 0 and b:nElement() == 0 then return 0 end
  if not a:isSameSizeAs(b) then return math.huge end
  local scale = math.max(1, b:clone():abs():max())
  return a:clone():double():add(-1, b:clone():double()):abs():max() / scale
end
return maxDiff
