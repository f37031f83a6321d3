-- The CUDA op of histc and bhistc (math/join.lua checks the arguments and picks the range),
-- marshalled to the array module (luabridge/backend/cuda.py's histc). cat, split and chunk are
-- views and copies: no ops of their own.
local C = require 'torch.backend.cuda.core'
local call = C.call

require('torch.backend').register('cuda', {
  -- h, a zeroed host DoubleTensor of nbins (rows x nbins: a histogram per row of the matrix a),
  -- += the counts of a's elements in nbins equal bins over [lo, hi]
  histc = function(h, a, lo, hi) call('histc', h, a, lo, hi) end,
})
