-- require 'sys.colors': torch/sys's escape codes table on its own, the one sys.COLORS holds.
require 'sys'
return sys.COLORS
