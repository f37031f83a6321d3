-- require 'hash': torch/hash's init.lua returns its C library; here libhash is Lua (lua/libhash.lua)
return require 'libhash'
