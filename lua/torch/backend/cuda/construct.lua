-- The construction family on CUDA: sequence and cross run on the CPU (zeros, eye, ... are fills
-- and copies). The front end (math/construct.lua) checks for CUDA tensors first; the ops here
-- raise the error of an op the device lacks (backend.lacks).
require('torch.backend').lacks('cuda', { 'sequence', 'cross' })
