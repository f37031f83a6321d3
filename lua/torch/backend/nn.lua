-- The nn modules' ops in every backend's table (threshold, class_nll_forward, mse_loss ...:
-- lua/torch/README.md, "The front end and the op table"): loaded by nn, not by torch.
require 'torch.backend.cpu.nn'
require 'torch.backend.cuda.nn'
