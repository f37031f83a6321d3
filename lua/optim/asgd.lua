-- Averaged SGD (Bottou's sgd-2.0): x := (1 - lambda eta_t) x - eta_t df/dx, and the average
-- ax := ax + mu_t (x - ax), with eta_t = eta0 / (1 + lambda eta0 t)^alpha and
-- mu_t = 1 / max(1, t - t0), so averaging starts after t0 steps.
--   config: eta0 (1e-4), lambda (1e-4), alpha (0.75), t0 (1e6); the defaults are written into
--           config, as torch7 does
--   state:  t (steps taken), eta_t, mu_t, ax (the average), tmp
-- Returns x, {f(x) before the step} and ax.
function optim.asgd(opfunc, x, config, state)
  config = config or {}
  state = state or config
  config.eta0 = config.eta0 or 1e-4
  config.lambda = config.lambda or 1e-4
  config.alpha = config.alpha or 0.75
  config.t0 = config.t0 or 1e6
  state.eta_t = state.eta_t or config.eta0
  state.mu_t = state.mu_t or 1
  state.t = state.t or 0

  local fx, dfdx = optim._evaluate('asgd', opfunc, x)
  x:mul(1 - config.lambda * state.eta_t):add(-state.eta_t, dfdx)

  local ax = optim._buffer(state, 'ax', x, x, 0)
  local tmp = optim._buffer(state, 'tmp', x, x)
  if state.mu_t ~= 1 then
    ax:add(state.mu_t, tmp:add(x, -1, ax))
  else
    ax:copy(x)
  end

  state.t = state.t + 1
  state.eta_t = config.eta0 / (1 + config.lambda * config.eta0 * state.t) ^ config.alpha
  state.mu_t = 1 / math.max(1, state.t - config.t0)
  return x, { fx }, ax
end
