-- Small helpers of nngraph.
local utils = {}

function utils.istable(x) return type(x) == 'table' and not torch.typename(x) end

function utils.isNode(x) return torch.typename(x) == 'nngraph.Node' end

-- The largest positive integer key (holes count: {nil, b} has 2 entries to check).
function utils.tableMaxN(t)
  local n = 0
  for k in pairs(t) do
    if type(k) == 'number' and k > n then n = k end
  end
  return n
end

-- The message for `what[i]` that should be a node but is `bad`.
function utils.expectingNode(bad, what, i)
  if bad == nil then return ('%s[%d] is nil (typo / bad index?)'):format(what, i) end
  if torch.isTypeOf(bad, 'nn.Module') then
    return ('%s[%d] is an nn.Module, specifically a %s, but the only valid thing to pass is an instance of '
            .. 'nngraph.Node. Did you forget a second set of parens, which convert a nn.Module to a '
            .. 'nngraph.Node?'):format(what, i, torch.typename(bad))
  end
  return ('%s[%d] should be an nngraph.Node but is of type %s'):format(what, i, torch.type(bad))
end

return utils
