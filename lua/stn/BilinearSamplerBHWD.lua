-- nn.BilinearSamplerBHWD(): {images, grids} -> output. images B x H x W x D (contiguous), grids
-- B x oH x oW x 2 holding for each output pixel the (y, x) point of its image to read, in
-- normalized coordinates (-1 the first row / column, 1 the last). The output (B x oH x oW x D)
-- interpolates the four pixels around the point bilinearly; pixels outside the image count as 0.
-- A 3-D image with a 3-D grid is one sample. The gradient goes to the images (the four pixels,
-- weighted) and to the grids (the interpolation's derivative in y and x, scaled to normalized
-- coordinates), as stnbhwd's C.
local BilinearSamplerBHWD, parent = torch.class('nn.BilinearSamplerBHWD', 'nn.Module')

function BilinearSamplerBHWD:__init()
  parent.__init(self)
  self.gradInput = {}
end

local function sizestr(t) return table.concat(t:size():totable(), 'x') end

local function batched(self, input, gradOutput)
  if type(input) ~= 'table' or not torch.isTensor(input[1]) or not torch.isTensor(input[2]) then
    error('nn.BilinearSamplerBHWD: the input is a table {images, grids} of two tensors', 3)
  end
  local images, grids = input[1], input[2]
  local single = images:dim() == 3
  if single then
    images = images:view(1, images:size(1), images:size(2), images:size(3))
    if grids:dim() ~= 3 then
      error(('nn.BilinearSamplerBHWD: a 3-D image takes a 3-D grid, got grids of size %s'):format(sizestr(grids)), 3)
    end
    grids = grids:view(1, grids:size(1), grids:size(2), grids:size(3))
    if gradOutput then gradOutput = gradOutput:view(1, gradOutput:size(1), gradOutput:size(2), gradOutput:size(3)) end
  end
  if images:dim() ~= 4 then
    error(('nn.BilinearSamplerBHWD: images must be B x H x W x D, got size %s'):format(sizestr(images)), 3)
  end
  if not images:isContiguous() then error('nn.BilinearSamplerBHWD: Input images have to be contiguous', 3) end
  if grids:dim() ~= 4 or grids:size(4) ~= 2 or grids:size(1) ~= images:size(1) then
    error(('nn.BilinearSamplerBHWD: grids must be B x oH x oW x 2 with the images\' batch (%d), got size %s'):format(
      images:size(1), sizestr(grids)), 3)
  end
  if gradOutput and (gradOutput:size(1) ~= grids:size(1) or gradOutput:size(2) ~= grids:size(2)
     or gradOutput:size(3) ~= grids:size(3)) then
    error(('nn.BilinearSamplerBHWD: gradOutput of size %s does not match grids of size %s'):format(
      sizestr(gradOutput), sizestr(grids)), 3)
  end
  return images, grids, gradOutput, single
end

-- The four neighbours of every grid point: for each corner (top left, top right, bottom left,
-- bottom right) its row indices into images:view(B*H*W, D) (1-based; 1 where outside), its
-- weight (0 where outside), and the x and y weights of the top left corner.
local function corners(images, grids)
  local B, H, W = images:size(1), images:size(2), images:size(3)
  local n = grids:size(1) * grids:size(2) * grids:size(3)
  local g = grids:contiguous():view(n, 2)
  local ycoord = g:select(2, 1):clone():add(1):mul((H - 1) / 2)
  local xcoord = g:select(2, 2):clone():add(1):mul((W - 1) / 2)
  local y0, x0 = torch.floor(ycoord), torch.floor(xcoord)
  local wy = y0 - ycoord + 1   -- 1 - (ycoord - y0)
  local wx = x0 - xcoord + 1
  local base = torch.range(0, grids:size(1) - 1):typeAs(ycoord):mul(H * W)
    :view(grids:size(1), 1):expand(grids:size(1), grids:size(2) * grids:size(3)):contiguous():view(n)
  local out = {}
  for k, c in ipairs({ { 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 } }) do
    local y, x = y0 + c[1], x0 + c[2]
    local inside = torch.ge(y, 0):cmul(torch.le(y, H - 1)):cmul(torch.ge(x, 0)):cmul(torch.le(x, W - 1)):typeAs(y)
    local rows = (base + y * W + x):cmul(inside):add(1):long()   -- outside: row 1, weight 0
    local w = (c[1] == 0 and wy:clone() or (1 - wy)):cmul(c[2] == 0 and wx or (1 - wx)):cmul(inside)
    out[k] = { rows = rows, weight = w, inside = inside }
  end
  return out, wx, wy
end

function BilinearSamplerBHWD:updateOutput(input)
  local images, grids, _, single = batched(self, input)
  local B, D = images:size(1), images:size(4)
  local oH, oW = grids:size(2), grids:size(3)
  local flat = images:view(-1, D)
  local cs = corners(images, grids:typeAs(images))
  local out = images.new(B * oH * oW, D):zero()
  for _, c in ipairs(cs) do
    out:add(flat:index(1, c.rows):cmul(c.weight:view(-1, 1):expandAs(out)))
  end
  self.output = out:view(B, oH, oW, D)
  if single then self.output = self.output[1] end
  return self.output
end

function BilinearSamplerBHWD:updateGradInput(input, gradOutput)
  local images, grids, go, single = batched(self, input, gradOutput)
  local B, H, W, D = images:size(1), images:size(2), images:size(3), images:size(4)
  local n = grids:size(1) * grids:size(2) * grids:size(3)
  go = go:contiguous():view(n, D)
  local flat = images:view(-1, D)
  local cs, wx, wy = corners(images, grids:typeAs(images))
  local gradImages = images.new(B * H * W, D):zero()
  local dots = {}
  for k, c in ipairs(cs) do
    gradImages:indexAdd(1, c.rows, torch.cmul(go, c.weight:view(-1, 1):expandAs(go)))
    dots[k] = torch.cmul(flat:index(1, c.rows), go):sum(2):view(n):cmul(c.inside)
  end
  local tl, tr, bl, br = dots[1], dots[2], dots[3], dots[4]
  local gy = torch.cmul(bl - tl, wx) + torch.cmul(br - tr, 1 - wx)
  local gx = torch.cmul(tr - tl, wy) + torch.cmul(br - bl, 1 - wy)
  local gradGrids = images.new(n, 2)
  gradGrids:select(2, 1):copy(gy:mul((H - 1) / 2))
  gradGrids:select(2, 2):copy(gx:mul((W - 1) / 2))
  self.gradInput = { gradImages:view(B, H, W, D), gradGrids:view(grids:size()):typeAs(input[2]) }
  if single then self.gradInput = { self.gradInput[1][1], self.gradInput[2][1] } end
  return self.gradInput
end
