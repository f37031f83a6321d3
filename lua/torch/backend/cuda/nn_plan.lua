-- The nn_plan family on CUDA: whole-model plans are oneDNN's, on the CPU (backend/cpu/nn_plan.lua).
-- CUDA tensors are never planned (plan_conv_supported says so: their containers run layer by
-- layer); the other ops raise the error of an op the device lacks.
local backend = require 'torch.backend'

backend.register('cuda', {
  plan_conv_supported = function() return false end,
})
backend.lacks('cuda', { 'plan_conv_threads', 'plan_conv_compile', 'plan_conv_run', 'plan_train_compile',
  'plan_train_forward', 'plan_train_backward', 'plan_train_steps' })
