-- The torch7-compatible tensor library.
local torch = require 'torch.env'
require 'torch.class'
require 'torch.Storage'
require 'torch.Tensor'
require 'torch.math.copy'
require 'torch.print'
require 'torch.defaults'
return torch
