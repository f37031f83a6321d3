-- The CUDA op table's elementwise nn passes: the same names as backend/cpu/nn_pointwise.lua,
-- as tensor ops (each running as the array module's vectorized code). The module comes first
-- where its passes keep scratch buffers on it (m._part, m._mask, ...: its clearState drops them).
local backend = require 'torch.backend'

local scratch, mask = backend.moduleScratch, backend.mask

local ops = {}

-- No elementwise loops are compiled for CUDA tensors: pointwise.define and loss.define take the
-- module's tensor ops instead.
function ops.nn_loop() return nil end

-- nn.CReLU: max(x, 0) and -min(x, 0); gi = g1 (x > 0) - g2 (-x > 0).
function ops.crelu_forward(_, out, x)
  out:select(2, 1):cmax(x, 0)
  out:select(2, 2):cmin(x, 0):mul(-1)
end

function ops.crelu_backward(m, gi, x, g1, g2)
  gi:cmul(g1, mask(m, x, 0))
  local negated = scratch(m, '_part', x):mul(x, -1)
  gi:addcmul(-1, g2, mask(m, negated, 0))
end

-- nn.PReLU: max(x, 0) + w min(x, 0), the slope w + mask (1 - w) with mask = (x > 0), and
-- min(x, 0) gradOutput for the weight.
function ops.prelu_forward(m, out, x, w)
  local below = torch.cmin(scratch(m, '_part', x), x, 0):cmul(w)
  out:cmax(x, 0):add(below)
end

function ops.prelu_backward(m, gi, x, go, w)
  local above = mask(m, x, 0)
  local slope = scratch(m, '_part', x):copy(w):addcmul(-1, above, w):add(above)
  gi:cmul(go, slope)
end

function ops.prelu_slope_grad(_, buf, x, go) torch.cmin(buf, x, 0):cmul(go) end

-- nn.GatedLinearUnit: gradOutput a s (1 - s).
function ops.glu_gate_grad(_, gb, gradOutput, a, s)
  gb:copy(s):mul(-1):add(1):cmul(s):cmul(a):cmul(gradOutput)
end

-- nn.CMaxTable / CMinTable: take = (x beats output), output += take (x - output), index +=
-- take (i - index); gradInput = (index == i) gradOutput.
function ops.table_extremum_update(m, compare, output, index, x, i)
  local take = scratch(m, '_take', x)
  take[compare == '>' and 'gt' or 'lt'](take, x, output)
  local step = scratch(m, '_step', x):add(x, -1, output)
  output:addcmul(take, step)
  index:addcmul(take, step:fill(i):add(-1, index))
end

function ops.table_extremum_route(gi, index, gradOutput, i) gi:eq(index, i):cmul(gradOutput) end

-- nn.LogSoftMax's row loops read host memory: the module's tensor ops run instead.
function ops.log_softmax_rows_forward() return false end
function ops.log_softmax_rows_backward() return false end

-- oneDNN's passes (the CPU table's nn_eltwise_*, nn_softmax_*, nn_binary) are host passes: the
-- modules' tensor ops run instead.
function ops.nn_eltwise_forward() return false end
function ops.nn_eltwise_backward() return false end
function ops.nn_softmax_forward() return false end
function ops.nn_softmax_backward() return false end
function ops.nn_binary() return false end
function ops.nn_copy() return false end

backend.register('cuda', ops)

-- nn.RReLU is CPU only (the module says so first); ptr, the element pointer of host memory, is
-- read by the criterions that check for host tensors first (nn/util/targets.lua) and the graph
-- executor's direct operands.
backend.lacks('cuda', { 'rrelu_keep_positive', 'rrelu_leaky', 'rrelu_leaky_grad', 'ptr' })
