-- Stochastic gradient descent with learning-rate decay, L2 weight decay (global or per element),
-- momentum with dampening, Nesterov momentum and per-element learning rates.
--   config: learningRate (1e-3), learningRateDecay (0), weightDecay (0), weightDecays (tensor),
--           momentum (0), dampening (= momentum), nesterov (false), learningRates (tensor)
--   state:  evalCounter, dfdx (the momentum buffer), decayParameters, deltaParameters
function optim.sgd(opfunc, x, config, state)
  config = config or {}
  state = state or config
  local lr = config.learningRate or 1e-3
  local lrd = config.learningRateDecay or 0
  local wd = config.weightDecay or 0
  local mom = config.momentum or 0
  local damp = config.dampening or mom
  local lrs, wds = config.learningRates, config.weightDecays
  assert(not config.nesterov or (mom > 0 and damp == 0),
         'Nesterov momentum requires a momentum and zero dampening')
  state.evalCounter = state.evalCounter or 0

  local fx, dfdx = optim._evaluate('sgd', opfunc, x)

  if wd ~= 0 then
    dfdx:add(wd, x)
  elseif wds then
    local decay = optim._buffer(state, 'decayParameters', x, dfdx)
    dfdx:add(decay:copy(wds):cmul(x))
  end

  if mom ~= 0 then
    if state.dfdx then
      state.dfdx:mul(mom):add(1 - damp, dfdx)
    else
      state.dfdx = x.new():resizeAs(dfdx):copy(dfdx)   -- the first step takes the raw gradient
    end
    if config.nesterov then dfdx:add(mom, state.dfdx) else dfdx = state.dfdx end
  end

  local clr = lr / (1 + state.evalCounter * lrd)
  if lrs then
    local delta = optim._buffer(state, 'deltaParameters', x, dfdx)
    x:add(-clr, delta:copy(lrs):cmul(dfdx))
  else
    x:add(-clr, dfdx)
  end
  state.evalCounter = state.evalCounter + 1
  return x, { fx }
end
