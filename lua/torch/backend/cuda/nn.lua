-- The CUDA op table's nn ops: the device passes of the nn modules whose CPU passes are LuaJIT
-- or numpy loops (the CPU ops: backend/cpu/nn.lua). They marshal to the array
-- module's code (luabridge/backend/cuda.py, cuda_nn.py) by name; operands arrive checked by the
-- modules, results sized.
local backend = require 'torch.backend'
local call = require('torch.backend.cuda.core').call

local scratch = backend.scratch

local ops = {}

-- ClassNLLCriterion: returns (-sum of the weighted picked log-probabilities, the total weight);
-- the backward zeroes gradInput first.
function ops.class_nll_forward(input, target, weights, ignore)
  return call('class_nll_forward', input, target, weights, ignore)
end

function ops.class_nll_backward(gradInput, target, weights, ignore, sizeAverage)
  call('class_nll_backward', gradInput, target, weights, ignore, sizeAverage)
end

-- MSECriterion: the sum of (x - y)^2, and gradInput = 2 * norm * (x - y) (no weights, margin).
function ops.mse_loss(input, target)
  local d = scratch(input)
  call('add', d, input, -1, target)
  return call('dot', d, d)
end

function ops.mse_grad(gradInput, input, target, _, norm)
  call('add', gradInput, input, -1, target)
  call('binary', 'mul', gradInput, gradInput, 2 * norm)
end

-- Threshold: output = input where input > th, else val; output may be input.
function ops.threshold(output, input, th, val)
  if val == th then return call('binary', 'max', output, input, th) end
  local above = scratch(input)
  call('binary', 'gt', above, input, th)      -- 1 above, 0 elsewhere
  call('binary', 'mul', output, input, above)
  call('add', above, above, -1, nil)          -- 0 above, -1 elsewhere
  call('add', output, output, -val, above)
end

-- gradInput = gradOutput where input > th, else 0; gradInput may be gradOutput.
function ops.threshold_backward(gradInput, input, gradOutput, th)
  local above = scratch(input)
  call('binary', 'gt', above, input, th)
  call('binary', 'mul', gradInput, gradOutput, above)
end

-- Sigmoid's and Tanh's gradients from their output y: gradInput = gradOutput * y * (1 - y),
-- gradOutput * (1 - y^2) (the CPU ops are nn's loops: nn/util/pointwise.lua)
function ops.sigmoid_backward(gradInput, _, gradOutput, output)
  local slope = scratch(output)
  call('binary', 'mul', slope, output, -1)
  call('add', slope, slope, 1, nil)
  call('binary', 'mul', slope, slope, output)
  call('binary', 'mul', gradInput, gradOutput, slope)
end

function ops.tanh_backward(gradInput, _, gradOutput, output)
  local slope = scratch(output)
  call('binary', 'mul', slope, output, output)
  call('binary', 'mul', slope, slope, -1)
  call('add', slope, slope, 1, nil)
  call('binary', 'mul', gradInput, gradOutput, slope)
end

-- nn.Linear on a batch (the CPU ops' contract: backend/cpu/nn.lua), as the gemm op's products
function ops.linear_forward(out, input, weight, bias, ones)
  local gemm = backend.cuda.gemm
  gemm(out, 0, out, 1, input, weight:t())
  if bias then gemm(out, 1, out, 1, ones, bias) end
end

function ops.linear_grad_input(gradInput, gradOutput, weight)
  backend.cuda.gemm(gradInput, 0, gradInput, 1, gradOutput, weight)
end

function ops.linear_acc_grad(gradWeight, gradBias, input, gradOutput, ones, scale)
  local gemm, gradOutputT = backend.cuda.gemm, gradOutput:t()
  gemm(gradWeight, 1, gradWeight, scale, gradOutputT, input)
  if gradBias then gemm(gradBias, 1, gradBias, scale, gradOutputT, ones) end
end

-- out = x with its trailing dims mapped by host matrices (planemaps.lua builds them)
function ops.plane_maps(out, x, backward, ...) call('plane_maps', out, x, backward, ...) end

backend.register('cuda', ops)
