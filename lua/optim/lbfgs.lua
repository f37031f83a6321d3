-- Limited-memory BFGS. Without config.lineSearch each iteration takes a fixed step of
-- config.learningRate along the quasi-Newton direction (the first one scaled by
-- min(1, 1/|g|_1)); with one, lineSearch(opfunc, x, t, d, f, g, gtd, config.lineSearchOptions)
-- returns f, g, x, t, evaluations.
--   config: maxIter (20), maxEval (1.25 * maxIter), tolFun (1e-5), tolX (1e-9),
--           nCorrection (100), lineSearch, lineSearchOptions, learningRate (1), verbose (false)
--   state:  funcEval, nIter, d, t, old_dirs, old_stps, Hdiag, g_old, f_old and buffers
-- Returns x, the function values seen ({f before, ..., f at x}) and this call's evaluation count
-- (none when the starting point is already optimal, as torch7).
local function say(config, msg)
  if config.verbose then print('<optim.lbfgs> ', msg) end   -- torch7's two print arguments
end

-- Two-loop recursion: d = -H g, H the inverse Hessian estimate from the pairs (s, y).
local function direction(state, g, d, hdiag, q)
  local s, y, k = state.old_dirs, state.old_stps, #state.old_dirs
  local ro, al = {}, {}
  for i = 1, k do ro[i] = 1 / y[i]:dot(s[i]) end
  q:mul(g, -1)
  for i = k, 1, -1 do
    al[i] = s[i]:dot(q) * ro[i]
    q:add(-al[i], y[i])
  end
  d:mul(q, hdiag)
  for i = 1, k do d:add(al[i] - y[i]:dot(d) * ro[i], s[i]) end
end

-- Records the pair s = t * d, y = g - g_old when it keeps the estimate positive definite,
-- dropping the oldest beyond nCorrection; buffers are recycled through torch7's pools
-- state.dir_bufs and state.stp_bufs (filled lazily here, so a torch7 state's buffers are reused).
local function remember(state, g, nCorrection)
  local y = table.remove(state.dir_bufs) or g.new(g:size())
  local s = table.remove(state.stp_bufs) or g.new(g:size())
  y:add(g, -1, state.g_old)
  s:mul(state.d, state.t)
  local ys = y:dot(s)
  if ys <= 1e-10 then
    table.insert(state.dir_bufs, y); table.insert(state.stp_bufs, s)
    return
  end
  if #state.old_dirs == nCorrection then
    table.insert(state.dir_bufs, table.remove(state.old_dirs, 1))
    table.insert(state.stp_bufs, table.remove(state.old_stps, 1))
  end
  table.insert(state.old_dirs, s)
  table.insert(state.old_stps, y)
  state.Hdiag = ys / y:dot(y)
end

function optim.lbfgs(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local maxIter = tonumber(config.maxIter) or 20
  local maxEval = tonumber(config.maxEval) or maxIter * 1.25
  local tolFun = config.tolFun or 1e-5
  local tolX = config.tolX or 1e-9
  local nCorrection = config.nCorrection or 100
  local lineSearch = config.lineSearch
  local lr = config.learningRate or 1
  state.funcEval = state.funcEval or 0
  state.nIter = state.nIter or 0

  local f, g = optim._evaluate('lbfgs', opfunc, x)
  local fHist, evals = { f }, 1
  state.funcEval = state.funcEval + 1
  state.tmp1 = state.tmp1 or g.new(g:size()):zero()
  local tmp = state.tmp1
  if tmp:copy(g):abs():sum() <= tolFun then
    say(config, 'optimality condition below tolFun')
    return x, fHist   -- no count here, as torch7
  end
  if not state.dir_bufs then
    say(config, 'creating recyclable direction/step/history buffers')
    state.dir_bufs, state.stp_bufs = {}, {}
  end

  local nIter = 0
  while nIter < maxIter do
    nIter = nIter + 1
    state.nIter = state.nIter + 1
    if state.nIter == 1 then
      state.d = g:clone():mul(-1)
      state.old_dirs, state.old_stps, state.Hdiag = {}, {}, 1
    else
      remember(state, g, nCorrection)
      direction(state, g, state.d, state.Hdiag, tmp)
    end
    state.g_old = state.g_old or g:clone()
    state.g_old:copy(g)
    state.f_old = f

    local gtd = g:dot(state.d)
    if gtd > -tolX then break end   -- not a descent direction any more

    if state.nIter == 1 then
      state.t = math.min(1, 1 / tmp:copy(g):abs():sum()) * lr
    else
      state.t = lr
    end
    local lsEvals = 0
    if type(lineSearch) == 'function' then
      f, g, x, state.t, lsEvals = lineSearch(opfunc, x, state.t, state.d, f, g, gtd, config.lineSearchOptions)
      table.insert(fHist, f)
    else
      x:add(state.t, state.d)
      if nIter ~= maxIter then   -- the last iteration does not evaluate (as torch7)
        f, g = optim._evaluate('lbfgs', opfunc, x)
        lsEvals = 1
        table.insert(fHist, f)
      end
    end
    evals = evals + lsEvals
    state.funcEval = state.funcEval + lsEvals

    local stop
    if nIter == maxIter then stop = 'reached max number of iterations'
    elseif evals >= maxEval then stop = 'max nb of function evals'
    elseif tmp:copy(g):abs():sum() <= tolFun then stop = 'optimality condition below tolFun'
    elseif tmp:copy(state.d):mul(state.t):abs():sum() <= tolX then stop = 'step size below tolX'
    elseif math.abs(f - state.f_old) < tolX then stop = 'function value changing less than tolX' end
    if stop then say(config, stop) break end
  end
  return x, fHist, evals
end
