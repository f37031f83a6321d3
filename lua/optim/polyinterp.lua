-- optim.polyinterp(points[, xminBound, xmaxBound]): the minimiser of the cubic interpolating
-- two points given as rows {x, f(x), f'(x)} of a 2 x 3 tensor, as torch7's line searches use it.
-- Without bounds torch7's closed form, clamped as torch7 clamps it: min(max(t, x of the lower
-- point), x of the other point); with bounds the cubic's minimum over [xminBound, xmaxBound]
-- among the bounds, the two x and the cubic's stationary points.
local function closedForm(x, f, g)
  local lo = f[1] <= f[2] and 1 or 2
  local hi = 3 - lo
  local d1 = g[lo] + g[hi] - 3 * (f[lo] - f[hi]) / (x[lo] - x[hi])
  local d2sq = d1 * d1 - g[lo] * g[hi]
  if d2sq < 0 then return (x[1] + x[2]) / 2 end   -- complex stationary points: the midpoint
  local d2 = math.sqrt(d2sq)
  local t = x[hi] - (x[hi] - x[lo]) * ((g[hi] + d2 - d1) / (g[hi] - g[lo] + 2 * d2))
  return math.min(math.max(t, x[lo]), x[hi])
end

-- The cubic p(x1 + s) = f1 + g1 s + c2 s^2 + c3 s^3 matching f and f' at both points.
local function hermite(x, f, g)
  local h = x[2] - x[1]
  local slope = (f[2] - f[1]) / h
  local c2 = (3 * slope - 2 * g[1] - g[2]) / h
  local c3 = (g[1] + g[2] - 2 * slope) / (h * h)
  return function(s) return f[1] + s * (g[1] + s * (c2 + s * c3)) end, c2, c3
end

-- Real roots of a + b s + c s^2.
local function quadraticRoots(a, b, c)
  if c == 0 then return b ~= 0 and { -a / b } or {} end
  local disc = b * b - 4 * a * c
  if disc < 0 then return {} end
  local r = math.sqrt(disc)
  return { (-b + r) / (2 * c), (-b - r) / (2 * c) }
end

function optim.polyinterp(points, xminBound, xmaxBound)
  if not torch.isTensor(points) or points:dim() ~= 2 or points:size(1) ~= 2 or points:size(2) ~= 3 then
    error('optim.polyinterp: expecting a 2x3 tensor of points {x, f, df/dx}' ..
          (torch.isTensor(points) and (', got ' .. table.concat(points:size():totable(), 'x')) or ''), 2)
  end
  local x, f, g = {}, {}, {}
  for i = 1, 2 do x[i], f[i], g[i] = points[i][1], points[i][2], points[i][3] end
  if not xminBound and not xmaxBound then return closedForm(x, f, g) end
  xminBound = xminBound or math.min(x[1], x[2])
  xmaxBound = xmaxBound or math.max(x[1], x[2])
  if x[1] == x[2] then return x[1] end
  local p, c2, c3 = hermite(x, f, g)
  local candidates = { xminBound, xmaxBound, x[1], x[2] }
  for _, s in ipairs(quadraticRoots(g[1], 2 * c2, 3 * c3)) do candidates[#candidates + 1] = x[1] + s end
  local best, fbest = (xminBound + xmaxBound) / 2, math.huge
  for _, c in ipairs(candidates) do
    if c >= xminBound and c <= xmaxBound then
      local v = p(c - x[1])
      if v < fbest then best, fbest = c, v end
    end
  end
  return best
end
