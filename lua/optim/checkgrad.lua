-- optim.checkgrad(opfunc, x[, eps]) -> diff, dC, dC_est: compares opfunc's gradient dC at x with
-- central differences (f(x + eps e_i) - f(x - eps e_i)) / 2 eps (eps: 1e-7), element by element;
-- diff = |dC - dC_est| / |dC + dC_est|, near zero when the gradient is right. x is restored;
-- dC is a copy taken before the differences are evaluated (opfunc may reuse its gradient buffer).
local function number(v)
  if torch.isTensor(v) then
    if v:nElement() ~= 1 then
      error('optim.checkgrad: opfunc must return a number or a one-element tensor, got a tensor of ' ..
            v:nElement() .. ' elements', 3)
    end
    return v:storage()[v:storageOffset()]
  end
  return v
end

function optim.checkgrad(opfunc, x, eps)
  eps = eps or 1e-7
  local _, grad = optim._evaluate('checkgrad', opfunc, x)
  local dC = grad:clone():resize(x:size())
  local flat = x:dim() == 1 and x or x:view(x:nElement())
  local dC_est = dC.new():resizeAs(dC)
  local estFlat = dC_est:view(dC_est:nElement())
  for i = 1, flat:size(1) do
    local xi = flat[i]
    flat[i] = xi + eps
    local above = number(opfunc(x))
    flat[i] = xi - eps
    local below = number(opfunc(x))
    flat[i] = xi
    estFlat[i] = (above - below) / (2 * eps)
  end
  local diff = torch.norm(dC - dC_est) / torch.norm(dC + dC_est)
  return diff, dC, dC_est
end
