-- The CPU op table's elementwise nn passes: LuaJIT loops over the modules' operands (checked and
-- sized by the modules, nn/util/pointwise.lua and the activation modules), and nn_loop, the
-- builder of the loops that pointwise.define and loss.define compile from a module's body.
-- backend/cuda/nn_pointwise.lua has the same names: tensor ops.
local backend = require 'torch.backend'
local apply = require 'torch.backend.cpu.apply'
local eltwise = require 'torch.backend.cpu.dnnl_eltwise'

local kernel, ptr = apply.kernel, apply.ptr
local isContiguous, numel = apply.isContiguous, apply.numel

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
-- of t's type and element count, 1-D or 2-D; else nil. (Types by name and metatable: t:type()
-- is a tail call, and many in one trace abort it.)
local function rows(t, others)
  if not floating[torch.typename(t)] or t:dim() > 2 or not apply.isContiguous(t) then return nil end
  local mt, n = getmetatable(t), numel(t)
  for _, x in ipairs(others) do
    if getmetatable(x) ~= mt or not apply.isContiguous(x) or numel(x) ~= n then return nil end
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

------------------------------------------------------------------------------------------------
-- oneDNN's passes (torch.backend.cpu.dnnl_eltwise) for the modules' contiguous Float operands,
-- on all the threads torch.setnumthreads allows, where the pass's measured limits say they pay
-- (dnnl_eltwise.threads). Each returns false (nothing done) otherwise: the module runs its own
-- loop or tensor ops then, as it does for Double, without oneDNN or with dnnl.enabled false.

-- The element count of t where t, a, b and c are contiguous Float tensors of as many elements
-- (a, b, c may be nil); else nil.
local function like(x, dt, n)
  return x == nil or (x._dt == dt and isContiguous(x) and numel(x) == n)
end

local function floats(t, a, b, c)
  local dt = t._dt
  if dt.name ~= 'Float' or not isContiguous(t) then return nil end
  local n = numel(t)
  if like(a, dt, n) and like(b, dt, n) and like(c, dt, n) then return n end
end

-- output = f(input), f the eltwise kind alg (dnnl_eltwise.ALG) with parameters alpha, beta, for
-- the module named `name` (whose own pass is what oneDNN's must beat: dnnl_eltwise.limits).
function ops.nn_eltwise_forward(name, alg, alpha, beta, output, input)
  local n = floats(output, input)
  local threads = n and eltwise.threads('ef', name, n)
  return threads ~= nil and eltwise.forward(alg, alpha, beta, n, threads, ptr(output), ptr(input))
end

-- gradInput = f'(data) gradOutput; data is the forward's input, or its output for the kinds
-- named *_dst. gradInput may be gradOutput.
function ops.nn_eltwise_backward(name, alg, alpha, beta, gradInput, gradOutput, data)
  local n = floats(gradInput, gradOutput, data)
  local threads = n and eltwise.threads('eb', name, n)
  return threads ~= nil and eltwise.backward(alg, alpha, beta, n, threads, ptr(gradInput),
    ptr(gradOutput), ptr(data))
end

-- torch7's softmax dims as rows x classes blocks (dnnl_eltwise.softmaxForward's a x b x 0):
-- classes; batch x classes; and classes x h x w, batch x classes x h x w where h x w is 1.
-- Not the spatial ones along an outer dim: there oneDNN's reference loops run, 5 to 10 times
-- slower than the module's tensor ops.
local function block(t)
  local sz, d = t._sz, #t._sz
  if d == 1 then return 0, sz[1], 0 end
  if d == 2 then return sz[1], sz[2], 0 end
  if d == 3 and sz[2] * sz[3] == 1 then return 0, sz[1], 0 end
  if d == 4 and sz[3] * sz[4] == 1 then return sz[1], sz[2], 0 end
end

-- output = softmax (kind 'soft') or log-softmax ('log') of input along torch7's class dim;
-- output sized as input.
function ops.nn_softmax_forward(kind, output, input)
  local n = floats(output, input)
  local threads = n and eltwise.threads('sf', kind, n)
  if not threads then return false end
  local a, b, c = block(input)
  return b ~= nil and eltwise.softmaxForward(kind, a, b, c, threads, ptr(output), ptr(input))
end

-- gradInput from gradOutput and the forward's output (gradInput may be gradOutput).
function ops.nn_softmax_backward(kind, gradInput, gradOutput, output)
  local n = floats(gradInput, gradOutput, output)
  local threads = n and eltwise.threads('sb', kind, n)
  if not threads then return false end
  local a, b, c = block(output)
  return b ~= nil and eltwise.softmaxBackward(kind, a, b, c, threads, ptr(gradInput),
    ptr(gradOutput), ptr(output))
end

-- out = x + y or x * y (kind 'add', 'mul') elementwise over as many elements (out may be x).
function ops.nn_binary(kind, out, x, y)
  local n = floats(out, x, y)
  local threads = n and eltwise.threads('bin', kind, n)
  return threads ~= nil and eltwise.binary(kind, n, threads, ptr(out), ptr(x), ptr(y))
end

-- out = x, as many elements (nn.CAddTable's gradients): oneDNN's linear kind, 1 x + (-0), which
-- gives every float back as it is (-0 and NaN too).
function ops.nn_copy(out, x)
  local n = floats(out, x)
  local threads = n and eltwise.threads('bin', 'copy', n)
  return threads ~= nil and eltwise.forward('linear', 1, -0.0, n, threads, ptr(out), ptr(x))
end

backend.register('cpu', ops)
