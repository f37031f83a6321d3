-- Connectionist temporal classification (Graves et al. 2006) for one sequence, in log space:
-- the cost -log p(labels | activations) and its gradient with respect to the activations
-- (before the softmax that it applies itself, as warp-ctc). Class 1 of the activations is the
-- blank; label k (1-based) is class k + 1.
local ctc = {}

local NEG_INF = -math.huge

local function logAdd(a, b)
  if a == NEG_INF then return b end
  if b == NEG_INF then return a end
  if a < b then a, b = b, a end
  return a + math.log(1 + math.exp(b - a))
end

-- The extended label sequence: blank, l1, blank, l2, ..., blank (as class indices).
local function extended(labels)
  local ext = {1}
  for _, l in ipairs(labels) do
    ext[#ext + 1] = l + 1
    ext[#ext + 1] = 1
  end
  return ext
end

-- May a path step from s - 2 to s (skipping a blank between two different labels)?
local function canSkip(ext, s)
  return s > 2 and ext[s] ~= 1 and ext[s] ~= ext[s - 2]
end

-- logy: T x D log-softmaxes of one sequence (a Lua-indexable tensor); grad: T x D, written.
-- Returns the cost (math.huge when no path of length T spells the labels).
function ctc.sequence(logy, labels, grad)
  local T, D = logy:size(1), logy:size(2)
  local ext = extended(labels)
  local S = #ext
  local y = {}
  for t = 1, T do
    local row, out = logy[t], {}
    for k = 1, D do out[k] = row[k] end
    y[t] = out
  end
  local alpha, beta = {}, {}
  for t = 1, T do
    alpha[t], beta[t] = {}, {}
    for s = 1, S do alpha[t][s], beta[t][s] = NEG_INF, NEG_INF end
  end
  alpha[1][1] = y[1][ext[1]]
  if S > 1 then alpha[1][2] = y[1][ext[2]] end
  for t = 2, T do
    for s = 1, S do
      local a = logAdd(alpha[t - 1][s], s > 1 and alpha[t - 1][s - 1] or NEG_INF)
      if canSkip(ext, s) then a = logAdd(a, alpha[t - 1][s - 2]) end
      alpha[t][s] = a == NEG_INF and a or a + y[t][ext[s]]
    end
  end
  beta[T][S] = y[T][ext[S]]
  if S > 1 then beta[T][S - 1] = y[T][ext[S - 1]] end
  for t = T - 1, 1, -1 do
    for s = 1, S do
      local b = logAdd(beta[t + 1][s], s < S and beta[t + 1][s + 1] or NEG_INF)
      if s + 2 <= S and canSkip(ext, s + 2) then b = logAdd(b, beta[t + 1][s + 2]) end
      beta[t][s] = b == NEG_INF and b or b + y[t][ext[s]]
    end
  end
  local logp = logAdd(alpha[T][S], S > 1 and alpha[T][S - 1] or NEG_INF)
  grad:zero()
  if logp == NEG_INF then return math.huge end
  -- d cost / d activation_k(t) = y_k(t) - sum_{s: ext[s] = k} alpha_t(s) beta_t(s) / (y_k(t) p)
  for t = 1, T do
    local occupancy = {}
    for s = 1, S do
      local k = ext[s]
      occupancy[k] = logAdd(occupancy[k] or NEG_INF, alpha[t][s] + beta[t][s])
    end
    local row = grad[t]
    for k = 1, D do
      local g = math.exp(y[t][k])
      if occupancy[k] then g = g - math.exp(occupancy[k] - y[t][k] - logp) end
      row[k] = g
    end
  end
  return -logp
end

return ctc
