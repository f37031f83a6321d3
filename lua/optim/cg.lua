-- Nonlinear conjugate gradients (Polak-Ribiere directions) with Rasmussen's line search by cubic
-- interpolation and extrapolation (minimize.m), as torch7's optim.cg.
--   config: maxEval (1.25 * maxIter; the budget of evaluations, what limits the run),
--           maxIter (20; evaluations per line search), rho (0.01) and sig (0.5) (Wolfe-Powell
--           constants), int (0.1; do not re-evaluate within 0.1 of the bracket's ends),
--           ext (3.0; extrapolate at most 3 times the current step), ratio (100; largest slope ratio)
--   state:  df0, df1, df2, df3, x0, s: buffers shaped like x, reused across calls
-- Returns x, the values after each successful line search ({f before, ...}) and the evaluations.
-- As in torch7 a failed line search ends the run.
local function isFinite(v) return v == v and v ~= math.huge and v ~= -math.huge end

local function buffer(state, name, x)
  local b = state[name] or x.new()
  state[name] = b
  return b:resizeAs(x)
end

function optim.cg(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local rho, sig = config.rho or 0.01, config.sig or 0.5
  local int, ext = config.int or 0.1, config.ext or 3.0
  local maxIter = config.maxIter or 20
  local ratio = config.ratio or 100
  local maxEval = config.maxEval or maxIter * 1.25

  local df0, df1, df2 = buffer(state, 'df0', x), buffer(state, 'df1', x), buffer(state, 'df2', x)
  buffer(state, 'df3', x)   -- part of torch7's state, unused by the algorithm
  local s, x0 = buffer(state, 's', x), buffer(state, 'x0', x)

  local evals = 0
  local function evaluate(into)
    local fv, gv = optim._evaluate('cg', opfunc, x)
    into:copy(gv)
    evals = evals + 1
    return fv
  end

  local f1 = evaluate(df1)
  local fHist = { f1 }
  s:copy(df1):mul(-1)
  local d1 = -s:dot(s)      -- slope along s
  local z1 = 1 / (1 - d1)   -- first step: 1 / (1 + |g|^2)

  while evals < math.abs(maxEval) do
    x0:copy(x)
    local f0 = f1
    df0:copy(df1)

    x:add(z1, s)
    local f2 = evaluate(df2)
    local d2 = df2:dot(s)
    local f3, d3, z3 = f1, d1, -z1   -- point 3 starts as point 1
    local budget = math.min(maxIter, maxEval - evals)
    local success, limit = false, -1

    while true do
      -- shrink while the point is not acceptable (Wolfe-Powell) and evaluations remain
      while (f2 > f1 + z1 * rho * d1 or d2 > -sig * d1) and budget > 0 do
        limit = z1
        local z2
        if f2 > f1 then   -- quadratic fit
          z2 = z3 - (0.5 * d3 * z3 * z3) / (d3 * z3 + f2 - f3)
        else              -- cubic fit
          local A = 6 * (f2 - f3) / z3 + 3 * (d2 + d3)
          local B = 3 * (f3 - f2) - z3 * (d3 + 2 * d2)
          z2 = (math.sqrt(B * B - A * d2 * z3 * z3) - B) / A
        end
        if not isFinite(z2) then z2 = z3 / 2 end
        z2 = math.max(math.min(z2, int * z3), (1 - int) * z3)
        z1 = z1 + z2
        x:add(z2, s)
        f2 = evaluate(df2)
        budget = budget - 1
        d2 = df2:dot(s)
        z3 = z3 - z2
      end
      if f2 > f1 + z1 * rho * d1 or d2 > -sig * d1 then break end   -- failure
      if d2 > sig * d1 then success = true break end
      if budget == 0 then break end

      -- extrapolate by a cubic, within the limits
      local A = 6 * (f2 - f3) / z3 + 3 * (d2 + d3)
      local B = 3 * (f3 - f2) - z3 * (d3 + 2 * d2)
      local z2 = -d2 * z3 * z3 / (B + math.sqrt(B * B - A * d2 * z3 * z3))
      if not isFinite(z2) or z2 < 0 then
        z2 = limit < -0.5 and z1 * (ext - 1) or (limit - z1) / 2
      elseif limit > -0.5 and z2 + z1 > limit then
        z2 = (limit - z1) / 2
      elseif limit < -0.5 and z2 + z1 > z1 * ext then
        z2 = z1 * (ext - 1)
      elseif z2 < -z3 * int then
        z2 = -z3 * int
      elseif limit > -0.5 and z2 < (limit - z1) * (1 - int) then
        z2 = (limit - z1) * (1 - int)
      end
      f3, d3, z3 = f2, d2, -z2
      z1 = z1 + z2
      x:add(z2, s)
      f2 = evaluate(df2)
      budget = budget - 1
      d2 = df2:dot(s)
    end

    if not success then
      x:copy(x0)   -- back to the last accepted point; torch7 stops on the first failure
      df1:copy(df0)
      break
    end
    f1 = f2
    fHist[#fHist + 1] = f1
    local beta = (df2:dot(df2) - df2:dot(df1)) / df1:dot(df1)   -- Polak-Ribiere
    s:mul(beta):add(-1, df2)
    df1, df2 = df2, df1
    d2 = df1:dot(s)
    if d2 > 0 then   -- not a descent direction: steepest descent
      s:copy(df1):mul(-1)
      d2 = -s:dot(s)
    end
    z1 = z1 * math.min(ratio, d1 / (d2 - 1e-320))
    d1 = d2
  end
  state.df1, state.df2 = df1, df2
  return x, fHist, evals
end
