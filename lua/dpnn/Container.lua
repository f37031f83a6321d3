-- dpnn's nn.Container additions: adding several modules at once, sparse parameters gathered
-- from the children, and per-child timings (profile).
local Container = nn.Container

function Container:extend(...)
  for _, m in ipairs({ ... }) do self:add(m) end
  return self
end

-- The children's sparse parameters one after another, each child's indices offset by the sizes
-- of those before it.
function Container:sparseParameters()
  local params, gradParams, scales, size = {}, {}, {}, 0
  for _, m in ipairs(self.modules) do
    local p, g, s, n = m:sparseParameters()
    if p then
      for k, param in pairs(p) do
        assert(torch.type(param) ~= 'table', 'sparseParameters: a child returned nested tables')
        params[size + k], gradParams[size + k], scales[size + k] = param, g[k], s and s[k]
      end
      size = size + (n or #p)
    end
  end
  return params, gradParams, scales, size
end

local timedMethods = { 'updateOutput', 'updateGradInput', 'accGradParameters', 'backward', 'accUpdateGradParameters' }

-- Each child of Sequential and ParallelTable prints how long each of its passes takes.
local function profileChildren(self)
  for _, m in ipairs(self.modules) do
    for _, method in ipairs(timedMethods) do
      local call = m[method]
      m[method] = function(module, ...)
        local timer = torch.Timer()
        local result = call(module, ...)
        if cutorch then cutorch.synchronize() end
        print(('%s %s: %s s'):format(torch.type(module), method, timer:time().real))
        return result
      end
    end
  end
  nn.Module.profile(self)
end

nn.Sequential.profile = profileChildren
nn.ParallelTable.profile = profileChildren
