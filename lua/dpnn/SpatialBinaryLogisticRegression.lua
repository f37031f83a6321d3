-- BinaryLogisticRegression per pixel of one-channel maps (1 x h x w or batch x 1 x h x w),
-- targets in {-1, 1} of the same size; the sum is divided by 2 * h * w, and by the batch size
-- too with sizeAverage (the default).
local SpatialBinaryLogisticRegression, parent = torch.class('nn.SpatialBinaryLogisticRegression', 'nn.BinaryLogisticRegression')

function SpatialBinaryLogisticRegression:__init()
  parent.__init(self, true)
end

function SpatialBinaryLogisticRegression:_normalizer(input, target)
  local op = 'nn.SpatialBinaryLogisticRegression'
  if input:dim() ~= 3 and input:dim() ~= 4 then
    error(('%s: expecting an image or a batch of images, got a %dD input'):format(op, input:dim()), 3)
  end
  if not input:isSameSizeAs(target) then
    error(("%s: input and target sizes don't match (%s and %s)"):format(op,
      table.concat(input:size():totable(), 'x'), table.concat(target:size():totable(), 'x')), 3)
  end
  local batch = input:dim() == 4
  if input:size(batch and 2 or 1) ~= 1 then error(op .. ': no. of channels should be 1', 3) end
  local h, w = input:size(input:dim() - 1), input:size(input:dim())
  return 2 * h * w * ((batch and self.sizeAverage) and input:size(1) or 1)
end
