-- The CUDA op table's temporal passes (the CPU ones: backend/cpu/nn_temporal.lua, whose loops
-- TemporalConvolution's CPU path and TemporalSubSampling use): marshallers to the array module's
-- code in luabridge's CUDA nn provider. Operands arrive checked, results sized.
local backend = require 'torch.backend'
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

backend.register('cuda', ops)
