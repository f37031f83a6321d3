-- CMA-ES (Hansen's covariance matrix adaptation evolution strategy, after his barecmaes2), as
-- torch7's optim.cmaes: gradient-free, only the first value opfunc returns is used.
--   config/state (read from state, which is config when not given):
--     sigma (the initial standard deviation of every coordinate; required), maxEval (1e3 N^2),
--     ftarget (stop once the best value of a generation is at most this), popsize
--     (4 + floor(3 ln N)), verb_disp (print progress every verb_disp generations; 0 or unset:
--     quiet), min_iterations (1)
-- Stops on maxEval, ftarget, a covariance condition above 1e14 (max D > 1e7 min D), a
-- generation's values spanning less than 1e-12, or sigma * max D < 1e-11.
-- Returns the best point seen (a flat copy, as torch7), the values ({f(x), the best of each
-- generation..., the best overall}) and the number of evaluations.
local function printProgress(counteval, lambda, every, D, sigma, C, best)
  local generation = counteval / lambda
  if generation == 1 or generation % (10 * every) == 0 then print('evals:\t ax-ratio max(std)   f-value') end
  if generation <= 2 or generation % every == 0 then
    print(tostring(counteval) .. ': ' ..
          string.format(' %6.1f %8.1e ', D:max() / D:min(), sigma * math.sqrt(torch.diag(C):max())) ..
          tostring(best))
  end
end

function optim.cmaes(opfunc, x, config, state)
  if x.triu == nil or x.diag == nil then
    error('Unsupported Tensor ' .. x:type() .. ' please use Float- or DoubleTensor for x', 2)
  end
  config = config or {}
  state = state or config
  local xmean = x:clone():view(-1)
  local N = xmean:size(1)
  local sigma = state.sigma
  if type(sigma) ~= 'number' then error('optim.cmaes: state.sigma (the initial step size) must be a number', 2) end
  local ftarget = state.ftarget
  local maxEval = tonumber(state.maxEval) or 1e3 * N ^ 2
  local verbDisp = state.verb_disp or 0
  local minIterations = state.min_iterations or 1
  local lambda = state.popsize or 4 + math.floor(3 * math.log(N))

  -- selection: mu = lambda / 2 parents (torch7 keeps a fractional mu in the weights' formula and
  -- uses its integer part as a count)
  local mu = lambda / 2
  local nParents = math.floor(mu)
  local weights = torch.Tensor(nParents)
  for i = 1, nParents do weights[i] = math.log(mu + 0.5) - math.log(i) end
  weights:div(weights:sum())
  local mueff = weights:sum() ^ 2 / weights:dot(weights)
  weights = weights:typeAs(x)

  -- adaptation constants
  local cc = (4 + mueff / N) / (N + 4 + 2 * mueff / N)
  local cs = (mueff + 2) / (N + mueff + 5)
  local c1 = 2 / ((N + 1.3) ^ 2 + mueff)
  local cmu = math.min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((N + 2) ^ 2 + mueff))
  local damps = 2 * mueff / lambda + 0.3 + cs

  local pc, ps = x.new(N):zero(), x.new(N):zero()   -- evolution paths of C and sigma
  local B = torch.eye(N):typeAs(x)                   -- eigenvectors of C
  local D = x.new(N):fill(1)                         -- square roots of C's eigenvalues
  local C = torch.eye(N):typeAs(x)
  local invsqrtC = torch.eye(N):typeAs(x)
  local ok, err = pcall(torch.symeig, C, 'V')
  if __luabridge_interrupt(err) then error(err, 0) end   -- Ctrl-C is no missing symeig
  if not ok then
    error('torch.symeig not available for ' .. x:type() .. ' please use Float- or DoubleTensor for x', 2)
  end
  local candidates = x.new(lambda, N)
  local fitvals = torch.Tensor(lambda)
  local eigeneval, counteval, iteration = 0, 0, 0
  local fHist = { (opfunc(x)) }
  local bestX, bestF, bestEvals

  -- lambda candidates from N(xmean, sigma^2 C); B and D refreshed from C only every few
  -- generations (O(N^2) per evaluation)
  local function ask()
    if counteval - eigeneval > lambda / (c1 + cmu) / N / 10 then
      eigeneval = counteval
      C = torch.triu(C) + torch.triu(C, 1):t()
      D, B = torch.symeig(C, 'V')
      D:sqrt()
      invsqrtC = B * torch.diag(torch.pow(D, -1)) * B:t()
    end
    for k = 1, lambda do
      local z = D:clone():normal(0, 1):cmul(D)
      candidates[k]:copy(xmean):add(sigma, B * z)
    end
    return candidates
  end

  -- moves the mean to the weighted best nParents, updates the paths, C and sigma
  local function tell(arx)
    counteval = counteval + lambda
    local xold = xmean:clone()
    local order
    fitvals, order = torch.sort(fitvals)
    local parents = arx:index(1, order:narrow(1, 1, nParents))
    fHist[#fHist + 1] = fitvals[1]
    if bestF == nil or fitvals[1] < bestF then
      bestX, bestF, bestEvals = parents[1]:clone(), fitvals[1], counteval
    end

    xmean:mv(parents:t(), weights)
    local y = xmean - xold
    local z = invsqrtC * y
    ps:mul(1 - cs):add(math.sqrt(cs * (2 - cs) * mueff) / sigma, z)
    local hsig = ps:dot(ps) / (1 - (1 - cs) ^ (2 * counteval / lambda)) / N < 2 + 4 / (N + 1) and 1 or 0
    pc:mul(1 - cc):add(math.sqrt(cc * (2 - cc) * mueff) / sigma * hsig, y)

    -- rank-one and rank-mu updates: C = (1 - c1a - cmu) C + c1 pc pc' + cmu sum_k w_k y_k y_k'
    local c1a = c1 - (1 - hsig ^ 2) * c1 * cc * (2 - cc)
    local steps = parents - xold:view(1, N):expandAs(parents)
    local weighted = torch.cmul(steps, weights:view(nParents, 1):expandAs(steps))
    C:mul(1 - c1a - cmu):addr(c1, pc, pc):addmm(cmu / sigma ^ 2, steps:t(), weighted)

    sigma = sigma * math.exp(math.min(0.6, (cs / damps) * (ps:dot(ps) / N - 1) / 2))
  end

  local function stopReasons()
    local reasons = {}
    if counteval > 0 then
      if counteval >= maxEval then reasons.evals = maxEval end
      if ftarget ~= nil and fitvals:nElement() > 0 and fitvals[1] <= ftarget then reasons.ftarget = ftarget end
      if D:max() > 1e7 * D:min() then reasons.condition = 1e7 end
      if fitvals:nElement() > 1 and fitvals[fitvals:nElement()] - fitvals[1] < 1e-12 then reasons.tolfun = 1e-12 end
      if sigma * D:max() < 1e-11 then reasons.tolx = 1e-11 end
    end
    return reasons
  end

  while next(stopReasons()) == nil or iteration < minIterations do
    iteration = iteration + 1
    local X = ask()
    for i = 1, lambda do fitvals[i] = (opfunc(X[i]:viewAs(x))) end
    tell(X)
    if verbDisp > 0 then printProgress(counteval, lambda, verbDisp, D, sigma, C, fitvals[1]) end
  end

  if verbDisp > 0 then
    for k, v in pairs(stopReasons()) do print('termination by', k, '=', v) end
    print('best f-value =', bestF)
    print('solution = ')
    print(bestX)
    print('best found at iteration: ', bestEvals / lambda, ' , total iterations: ', iteration)
  end
  fHist[#fHist + 1] = bestF
  return bestX, fHist, counteval
end
