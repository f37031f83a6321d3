-- stn: Maxime Oquab's spatial transformer modules (qassemoquab/stnbhwd), in Lua over our nn. The
-- images and grids are in BHWD layout (batch, height, width, channels). BilinearSamplerBHWD ran
-- in C (and CUDA) there; here it is vectorized tensor code with the same arithmetic. The
-- classes register in nn, as stnbhwd's did.
require 'nn'
stn = rawget(_G, 'stn') or {}
require 'stn.AffineTransformMatrixGenerator'
require 'stn.AffineGridGeneratorBHWD'
require 'stn.BilinearSamplerBHWD'
return nn
