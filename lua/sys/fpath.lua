-- require 'sys.fpath': torch/sys installs fpath on its own (MazeBase requires it so), the same
-- function as sys.fpath: the directory and name of the file that calls it.
require 'sys'
return sys.fpath
