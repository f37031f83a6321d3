-- A line search satisfying the strong Wolfe conditions, for optim.lbfgs's config.lineSearch:
-- optim.lswolfe(opfunc, x, t, d, f, g, gtd[, options]) looks along d from x (f, g: value and
-- gradient there, gtd = g . d < 0), starting with step t; returns f and g at the new x, x
-- (moved in place to x + t d), t and the number of evaluations.
--   options: c1 (1e-4, sufficient decrease), c2 (0.9, curvature), tolX (1e-9), maxIter (20), verbose
function optim.lswolfe(opfunc, x, t, d, f, g, gtd, options)
  options = options or {}
  local c1, c2 = options.c1 or 1e-4, options.c2 or 0.9
  local tolX, maxIter = options.tolX or 1e-9, options.maxIter or 20
  local x0 = x:clone()
  local evals = 0
  -- torch7 keeps the bracket's steps and values in tensors of x's type, so a FloatTensor x
  -- rounds them to single precision (which can decide comparisons): one cell of that type does
  local cell = x.new(1)
  local function keep(v) cell[1] = v; return cell[1] end
  local function evalAt(step)
    x:copy(x0):add(step, d)
    local fv, gv = optim._evaluate('lswolfe', opfunc, x)
    evals = evals + 1
    return fv, gv:clone(), gv:dot(d)
  end

  -- bracketing: grow the step until an interval holds an acceptable point (or one is found)
  local fNew, gNew, gtdNew = evalAt(t)
  local tPrev, fPrev, gPrev, gtdPrev = 0, f, g:clone(), gtd
  local iter, done = 0, false
  local br, brF, brG          -- bracket ends: steps, values, gradients
  while iter < maxIter do
    local armijoFails = fNew > f + c1 * t * gtd or (iter > 1 and fNew >= fPrev)
    if not armijoFails and math.abs(gtdNew) <= -c2 * gtd then
      br, brF, brG, done = { keep(t) }, { keep(fNew) }, { gNew }, true
      break
    elseif armijoFails or gtdNew >= 0 then
      br, brF, brG = { keep(tPrev), keep(t) }, { keep(fPrev), keep(fNew) }, { gPrev, gNew }
      break
    end
    local minStep, maxStep = t + 0.01 * (t - tPrev), t * 10
    local nextT = optim.polyinterp(x.new({ { tPrev, fPrev, gtdPrev }, { t, fNew, gtdNew } }), minStep, maxStep)
    tPrev, fPrev, gPrev, gtdPrev = t, fNew, gNew, gtdNew
    t = nextT
    fNew, gNew, gtdNew = evalAt(t)
    iter = iter + 1
  end
  if iter == maxIter then br, brF, brG = { 0, keep(t) }, { keep(f), keep(fNew) }, { g, gNew } end

  -- zoom: shrink the bracket until a point satisfies the conditions
  local insufficient = false
  while not done and iter < maxIter do
    local lo = brF[1] <= brF[2] and 1 or 2
    local hi = 3 - lo
    t = optim.polyinterp(x.new({ { br[1], brF[1], brG[1]:dot(d) }, { br[2], brF[2], brG[2]:dot(d) } }))
    local bmin, bmax = math.min(br[1], br[2]), math.max(br[1], br[2])
    if math.min(bmax - t, t - bmin) / (bmax - bmin) < 0.1 then   -- too close to an end
      if insufficient or t >= bmax or t <= bmin then
        t = math.abs(t - bmax) < math.abs(t - bmin) and bmax - 0.1 * (bmax - bmin) or bmin + 0.1 * (bmax - bmin)
        insufficient = false
      else
        insufficient = true
      end
    else
      insufficient = false
    end
    fNew, gNew, gtdNew = evalAt(t)
    iter = iter + 1
    if fNew > f + c1 * t * gtd or fNew >= brF[lo] then
      br[hi], brF[hi], brG[hi] = keep(t), keep(fNew), gNew
    else
      if math.abs(gtdNew) <= -c2 * gtd then
        done = true
      elseif gtdNew * (br[hi] - br[lo]) >= 0 then
        br[hi], brF[hi], brG[hi] = br[lo], brF[lo], brG[lo]
      end
      br[lo], brF[lo], brG[lo] = keep(t), keep(fNew), gNew
    end
    if not done and math.abs((br[1] - br[2]) * gtdNew) < tolX then break end
  end
  if iter == maxIter and options.verbose then print('<optim.lswolfe> ', 'reached max number of iterations') end

  local best = (#brF == 1 or brF[1] <= brF[2]) and 1 or 2
  x:copy(x0):add(br[best], d)
  return brF[best], brG[best], x, br[best], evals
end
