-- The CUDA op table's temporal passes (the CPU ones: backend/cpu/nn_temporal.lua, the same
-- names): marshallers to the array module's
-- code in luabridge's CUDA nn provider. Operands arrive checked, results sized.
local backend = require 'torch.backend'
local check = require 'torch.core.check'
local call = require('torch.backend.cuda.core').call

local ops = {}

-- nn.TemporalConvolution on batches (B x T x F input, B x nOF x O output and gradOutput, the
-- weight O x kW*F), the windows' geometry kW, dW
function ops.temporal_conv_forward(out, input, weight, bias, kW, dW)
  call('temporal_conv_forward', out, input, weight, bias, kW, dW)
end

function ops.temporal_conv_grad_input(gradInput, gradOutput, weight, kW, dW)
  call('temporal_conv_grad_input', gradInput, gradOutput, weight, kW, dW)
end

function ops.temporal_conv_acc_grad(gradWeight, gradBias, input, gradOutput, scale, kW, dW)
  call('temporal_conv_acc_grad', gradWeight, gradBias, input, gradOutput, scale, kW, dW)
end

-- nn.TemporalSubSampling is CPU only: the words of the CPU loop (backend/cpu/nn_temporal.lua)
-- that a device tensor used to reach, naming its type
function ops.temporal_subsample(_, x)
  check.error(('temporal subsampling: %s is not supported (a CPU loop)'):format(torch.typename(x)))
end

backend.register('cuda', ops)
