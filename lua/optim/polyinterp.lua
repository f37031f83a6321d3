-- optim.polyinterp(points[, xminBound, xmaxBound]) -> minPos[, fmin]: the minimiser of the
-- polynomial of degree 2N-1 interpolating N points given as rows {x, f(x), f'(x)} of an N x 3
-- tensor, as torch7's line searches use it.
-- Two points without bounds: torch7's closed form for the cubic, where the "low" point is the one
-- of smaller x (not of smaller f), clamped to [x low, x other]; the midpoint when the cubic has no
-- real stationary point. Otherwise the polynomial's minimum over [xminBound, xmaxBound] (defaults:
-- the smallest and largest x) among the bounds, the points' x and the real stationary points
-- (candidates in that order, the first of equal values wins; the midpoint of the bounds when none
-- is inside), returned with the polynomial's value there.
local TINY = 1e-12   -- coefficients this small count as zero, as torch7's

local function closedForm(x, f, g)
  local lo = x[1] <= x[2] and 1 or 2
  local hi = 3 - lo
  local d1 = g[lo] + g[hi] - 3 * (f[lo] - f[hi]) / (x[lo] - x[hi])
  local d2 = math.sqrt(d1 * d1 - g[lo] * g[hi])
  if d2 ~= d2 then return (x[1] + x[2]) / 2 end
  local t = x[hi] - (x[hi] - x[lo]) * ((g[hi] + d2 - d1) / (g[hi] - g[lo] + 2 * d2))
  return math.min(math.max(t, x[lo]), x[hi])
end

-- Coefficients c[1..2N] (highest power first) of the polynomial through the points' values and
-- slopes, in global coordinates (torch7 solves the same system).
local function interpolant(points, x, f, g)
  local n = #x
  local order = 2 * n - 1
  local A = points.new(2 * n, order + 1):zero()
  local b = points.new(2 * n, 1)
  for i = 1, n do
    for j = 1, order + 1 do
      local power = order + 1 - j
      A[i][j] = x[i] ^ power
      if power > 0 then A[n + i][j] = power * x[i] ^ (power - 1) end
    end
    b[i][1], b[n + i][1] = f[i], g[i]
  end
  local solution = torch.gels(b, A)
  local c = {}
  for j = 1, order + 1 do
    local v = solution[j][1]
    c[j] = math.abs(v) <= TINY and 0 or v
  end
  return c
end

local function evaluate(c, t)
  local v = 0
  for j = 1, #c do v = v * t + c[j] end
  return v
end

-- Real roots of the polynomial c (highest power first); trailing zero coefficients are roots at 0.
local function realRoots(c, like)
  local first, last = 1, #c
  while first <= last and math.abs(c[first]) < TINY do first = first + 1 end
  while last >= first and math.abs(c[last]) < TINY do last = last - 1 end
  local roots = {}
  for _ = last + 1, #c do roots[#roots + 1] = 0 end
  local degree = last - first
  if degree == 1 then
    roots[#roots + 1] = -c[last] / c[first]
  elseif degree > 1 then
    local companion = like.new(degree, degree):zero()
    for j = 1, degree do companion[1][j] = -c[first + j] / c[first] end
    for i = 2, degree do companion[i][i - 1] = 1 end
    local eig = torch.eig(companion, 'N')
    for i = 1, degree do
      if eig[i][2] == 0 then roots[#roots + 1] = eig[i][1] end
    end
  end
  return roots
end

function optim.polyinterp(points, xminBound, xmaxBound)
  if not torch.isTensor(points) or points:dim() ~= 2 or points:size(2) ~= 3 or points:size(1) < 2 then
    error('optim.polyinterp: expecting an N x 3 tensor (N >= 2) of points {x, f, df/dx}' ..
          (torch.isTensor(points) and (', got ' .. table.concat(points:size():totable(), 'x')) or ''), 2)
  end
  local x, f, g = {}, {}, {}
  for i = 1, points:size(1) do x[i], f[i], g[i] = points[i][1], points[i][2], points[i][3] end
  if #x == 2 and not xminBound and not xmaxBound then return closedForm(x, f, g) end

  xminBound = xminBound or math.min(unpack(x))
  xmaxBound = xmaxBound or math.max(unpack(x))
  local c = interpolant(points, x, f, g)
  local slope, finite = {}, true
  for j = 1, #c - 1 do
    slope[j] = c[j] * (#c - j)
    if slope[j] ~= slope[j] or slope[j] == math.huge then finite = false end
  end
  local candidates = { xminBound, xmaxBound, unpack(x) }
  if finite then
    for _, r in ipairs(realRoots(slope, points)) do candidates[#candidates + 1] = r end
  end
  local best, fbest = (xminBound + xmaxBound) / 2, math.huge
  for _, t in ipairs(candidates) do
    if t >= xminBound and t <= xmaxBound then
      local v = evaluate(c, t)
      if v < fbest then best, fbest = t, v end
    end
  end
  return best, fbest
end
