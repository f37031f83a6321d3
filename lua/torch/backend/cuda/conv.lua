-- The convolution family on CUDA: torch.conv2, xcorr2, conv3, xcorr3 run on the CPU (nn's
-- convolutions are nn_conv). The front end (math/conv.lua) checks for CUDA tensors first; the op
-- here raises the error of an op the device lacks (backend.lacks).
require('torch.backend').lacks('cuda', { 'xcorr3' })
