-- The transposed convolution over a connection table (see SpatialConvolutionMap): each
-- {input plane, output plane} row adds its input plane, spread by its own kernel, to its output
-- plane; output size (H-1)*dH + kH (likewise W). Runs as a dense SpatialFullConvolution.
local SpatialFullConvolutionMap = torch.class('nn.SpatialFullConvolutionMap', 'nn.Module')

SpatialFullConvolutionMap._denseClass, SpatialFullConvolutionMap._outputFirst = 'nn.SpatialFullConvolution', false
for _, name in ipairs { '__init', 'reset', '_slot', '_denseModule', 'updateOutput', 'updateGradInput',
                        'accGradParameters', 'type', 'clearState' } do
  SpatialFullConvolutionMap[name] = nn.SpatialConvolutionMap[name]
end
