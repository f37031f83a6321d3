-- The CPU op table's elementwise nn passes: LuaJIT loops over the modules' operands (checked and
-- sized by the modules, nn/util/pointwise.lua and the activation modules), and nn_loop, the
-- builder of the loops that pointwise.define and loss.define compile from a module's body.
-- backend/cuda/nn_pointwise.lua has the same names: tensor ops.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'

local kernel, ptr = apply.kernel, apply.ptr

local ops = {}

-- A loop over n operands from a body ('$1 = f($2)', scalars v1..v3: apply.kernel's); the CUDA
-- table's builder gives nil (it compiles no loops: its modules give tensor ops).
function ops.nn_loop(n, body) return kernel(n, body) end

-- nn.CReLU on x (samples x features, contiguous): out (samples x 2 x features) holds max(x, 0)
-- and max(-x, 0); gi = g1 (x > 0) - g2 (x < 0).
local positive = kernel(2, 'local x = $2; $1 = x > 0 and x or 0')
local negative = kernel(2, 'local x = $2; $1 = x < 0 and -x or 0')
local creluBackward = kernel(4, 'local x = $2; $1 = (x > 0 and $3 or 0) - (x < 0 and $4 or 0)')

function ops.crelu_forward(_, out, x)
  positive(out:select(2, 1), x)
  negative(out:select(2, 2), x)
end

function ops.crelu_backward(_, gi, x, g1, g2) creluBackward(gi, x, g1, g2) end

-- nn.PReLU: out = x for x > 0, else w x; gi = go for x > 0, else w go; the slopes' gradient
-- terms buf = 0 for x > 0, else x go (w expanded to x's size).
local preluForward = kernel(3, '$1 = $2 > 0 and $2 or $3 * $2')
local preluBackward = kernel(4, '$1 = $2 > 0 and $3 or $4 * $3')
local slopeGrad = kernel(3, '$1 = $2 > 0 and 0 or $2 * $3')

function ops.prelu_forward(_, out, x, w) preluForward(out, x, w) end
function ops.prelu_backward(_, gi, x, go, w) preluBackward(gi, x, go, w) end
function ops.prelu_slope_grad(_, buf, x, go) slopeGrad(buf, x, go) end

-- nn.RReLU: noise = 1 where input > 0 (else kept: the drawn slope); out = x for x > 0, else
-- slope x; gi = go for x > 0, else slope go.
ops.rrelu_keep_positive = kernel(2, '$1 = $2 > 0 and 1 or $1')                    -- noise, input
ops.rrelu_leaky = kernel(2, 'local x = $2; $1 = x > 0 and x or x * v1')            -- out, input, slope
ops.rrelu_leaky_grad = kernel(3, '$1 = $2 > 0 and $3 or $3 * v1')                  -- gi, input, go, slope

-- nn.GatedLinearUnit: d/db of a * sigmoid(b) times gradOutput, from s = sigmoid(b):
-- gb = gradOutput * a * s * (1 - s).
local gateGrad = kernel(4, 'local s = $4; $1 = $2 * $3 * s * (1 - s)')
function ops.glu_gate_grad(_, gb, gradOutput, a, s) gateGrad(gb, gradOutput, a, s) end

-- nn.CMaxTable / CMinTable (compare '>' or '<'): where x beats output, output = x and index = i;
-- the gradient gi = gradOutput where index == i, else 0.
local updates = {}
function ops.table_extremum_update(_, compare, output, index, x, i)
  local update = updates[compare]
  if not update then
    update = kernel(3, ('if $3 %s $1 then $1 = $3; $2 = v1 end'):format(compare))
    updates[compare] = update
  end
  update(output, index, x, i)
end

local route = kernel(3, '$1 = $2 == v1 and $3 or 0')
function ops.table_extremum_route(gi, index, gradOutput, i) route(gi, index, gradOutput, i) end

-- nn.LogSoftMax on rows of contiguous 1-D / 2-D Float and Double tensors: direct loops over the
-- memory, exp as numpy's SIMD loop over the whole block. Each returns false (nothing done)
-- where it does not apply; the module then runs its tensor ops.
local floating = { ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true }

-- Row count and length of t when every tensor in `others` and t are contiguous Float / Double
-- of t's type, 1-D or 2-D; else nil. (Types by name and metatable: t:type() is a tail call,
-- and many in one trace abort it.)
local function rows(t, others)
  if not floating[torch.typename(t)] or t:dim() > 2 or not apply.isContiguous(t) then return nil end
  local mt = getmetatable(t)
  for _, x in ipairs(others) do
    if getmetatable(x) ~= mt or not apply.isContiguous(x) then return nil end
  end
  if t:dim() == 1 then return 1, t:size(1) end
  return t:size(1), t:size(2)
end

local exp = function(r, a) backend.cpu.unary('exp', r, a) end

-- y = x - max(x) - log(sum(exp(x - max(x)))) per row (output sized as input; buf too).
function ops.log_softmax_rows_forward(output, input, buf)
  local n, c = rows(input, { output, buf })
  if not n then return false end
  if n * c == 0 then return true end
  local x, y, e = ptr(input), ptr(output), ptr(buf)
  for i = 0, n * c - 1, c do
    local mx = -math.huge
    for j = i, i + c - 1 do mx = math.max(mx, x[j]) end
    for j = i, i + c - 1 do y[j] = x[j] - mx end
  end
  exp(buf, output)
  for i = 0, n * c - 1, c do
    local s = 0
    for j = i, i + c - 1 do s = s + e[j] end
    local ls = math.log(s)
    for j = i, i + c - 1 do y[j] = y[j] - ls end
  end
  return true
end

-- gradInput = gradOutput - exp(y) * sum(gradOutput) per row (exp(y) in buf: gradInput may be
-- gradOutput).
function ops.log_softmax_rows_backward(gradInput, gradOutput, output, buf)
  local n, c = rows(output, { gradInput, gradOutput, buf })
  if not n then return false end
  if n * c == 0 then return true end
  local g, gi, e = ptr(gradOutput), ptr(gradInput), ptr(buf)
  exp(buf, output)
  for i = 0, n * c - 1, c do
    local s = 0
    for j = i, i + c - 1 do s = s + g[j] end
    for j = i, i + c - 1 do gi[j] = g[j] - e[j] * s end
  end
  return true
end

backend.register('cpu', ops)
