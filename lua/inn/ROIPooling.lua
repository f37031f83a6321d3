-- inn.ROIPooling(W, H, spatial_scale = 1): Fast R-CNN's region of interest max pooling. Input
-- {data, rois}: data N x C x height x width, rois R x 5 rows (image index, x1, y1, x2, y2), the
-- image index and the corners 1-based in input-image pixels. Each region, scaled by
-- spatial_scale onto the feature map, is cut into an H x W grid of bins; a bin's output is the
-- maximum of its feature cells per channel (0 for an empty bin). Output R x C x H x W.
-- The bins are imagine-nn's CUDA kernels' (its default v2: corners rounded half away from zero,
-- the end corner exclusive, bin edges rounded; with v2 = false the older kernel's, end corner
-- inclusive and bin edges floor/ceil). The gradient of a bin goes to the cell that gave its
-- maximum (the first in row-major order among equals); the rois get a zero gradient.
require 'inn.env'
local ROIPooling, parent = torch.class('inn.ROIPooling', 'nn.Module')

function ROIPooling:__init(W, H, spatial_scale)
  parent.__init(self)
  if type(W) ~= 'number' or type(H) ~= 'number' or W < 1 or H < 1 then
    error('inn.ROIPooling: the output width and height (W, H) must be positive numbers', 2)
  end
  self.W, self.H = W, H
  self.spatial_scale = spatial_scale or 1
  self.gradInput = {}
  self.indices = torch.LongTensor()   -- R x C x H x W: 0-based offset of each maximum in its plane, -1 if none
  self.v2 = true
end

function ROIPooling:setSpatialScale(scale)
  self.spatial_scale = scale
  return self
end

local function round(x)   -- C's round: halves away from zero
  if x >= 0 then return math.floor(x + 0.5) end
  return math.ceil(x - 0.5)
end

local function check(self, input)
  if type(input) ~= 'table' or #input ~= 2 or not torch.isTensor(input[1]) or not torch.isTensor(input[2]) then
    error('inn.ROIPooling: the input is a table {data, rois} of two tensors', 3)
  end
  local data, rois = input[1], input[2]
  if data:dim() ~= 4 then
    error(('inn.ROIPooling: data must be 4-D (N x C x H x W), got size %s'):format(
      table.concat(data:size():totable(), 'x')), 3)
  end
  if rois:dim() ~= 2 or rois:size(2) ~= 5 then
    error(('inn.ROIPooling: rois must be R x 5 (image, x1, y1, x2, y2), got size %s'):format(
      table.concat(rois:size():totable(), 'x')), 3)
  end
  return data, rois
end

-- the bins of roi r: image index (1-based) and, per bin, its rows [hs, he) and columns [ws, we), 0-based
local function bins(self, roi, height, width, nImages)
  local scale = self.spatial_scale
  local b = roi[1]
  if b ~= math.floor(b) or b < 1 or b > nImages then
    error(('inn.ROIPooling: a roi names image %s, the data has %d'):format(tostring(b), nImages), 4)
  end
  local x1, y1 = round((roi[2] - 1) * scale), round((roi[3] - 1) * scale)
  local x2, y2 = round((roi[4] - 1) * scale), round((roi[5] - 1) * scale)
  if self.v2 then x2, y2 = x2 - 1, y2 - 1 end
  local rw, rh = math.max(x2 - x1 + 1, 1), math.max(y2 - y1 + 1, 1)
  local bh, bw = rh / self.H, rw / self.W
  local lo, hi = math.floor, math.ceil
  if self.v2 then lo, hi = round, round end
  local rows, cols = {}, {}
  for ph = 0, self.H - 1 do
    rows[ph] = { math.min(math.max(lo(ph * bh) + y1, 0), height), math.min(math.max(hi((ph + 1) * bh) + y1, 0), height) }
  end
  for pw = 0, self.W - 1 do
    cols[pw] = { math.min(math.max(lo(pw * bw) + x1, 0), width), math.min(math.max(hi((pw + 1) * bw) + x1, 0), width) }
  end
  return b, rows, cols
end

function ROIPooling:updateOutput(input)
  local data, rois = check(self, input)
  local R, C, height, width = rois:size(1), data:size(2), data:size(3), data:size(4)
  if self.output:type() ~= data:type() then self.output = data.new() end
  self.output:resize(R, C, self.H, self.W):zero()
  self.indices:resize(R, C, self.H, self.W):fill(-1)
  local r64 = rois:double()
  for r = 1, R do
    local b, rows, cols = bins(self, r64[r]:totable(), height, width, data:size(1))
    local plane = data[b]
    for ph = 0, self.H - 1 do
      local hs, he = rows[ph][1], rows[ph][2]
      for pw = 0, self.W - 1 do
        local ws, we = cols[pw][1], cols[pw][2]
        if he > hs and we > ws then
          local region = plane[{ {}, { hs + 1, he }, { ws + 1, we } }]:contiguous():view(C, -1)
          local v, i = region:max(2)
          self.output[{ r, {}, ph + 1, pw + 1 }]:copy(v:view(C))
          -- the offset in the plane of the maximum: row hs + (i-1) // bw, column ws + (i-1) % bw
          local i0 = i:view(C):long():add(-1)
          local n = we - ws
          local rowOf = torch.div(i0, n)
          local offsets = rowOf:clone():add(hs):mul(width):add(i0 - rowOf * n):add(ws)
          self.indices[{ r, {}, ph + 1, pw + 1 }]:copy(offsets)
        end
      end
    end
  end
  return self.output
end

function ROIPooling:updateGradInput(input, gradOutput)
  local data, rois = check(self, input)
  local R, C, height, width = rois:size(1), data:size(2), data:size(3), data:size(4)
  if not gradOutput:isSize(torch.LongStorage { R, C, self.H, self.W }) or self.indices:dim() ~= 4
     or self.indices:size(1) ~= R then
    error(('inn.ROIPooling: gradOutput of size %s, expected %dx%dx%dx%d (call updateOutput with this input first)'):format(
      table.concat(gradOutput:size():totable(), 'x'), R, C, self.H, self.W), 2)
  end
  self.gradInput_boxes = self.gradInput_boxes or data.new()
  self.gradInput_rois = self.gradInput_rois or data.new()
  self.gradInput_boxes:resizeAs(data):zero()
  self.gradInput_rois:resizeAs(rois):zero()
  local plane = height * width
  local channelBase = torch.range(0, C - 1):long():mul(plane)
  for r = 1, R do
    local b = math.floor(rois[r][1])
    local flat = self.gradInput_boxes[b]:view(C * plane)
    local idx = self.indices[r]:view(C, self.H * self.W)
    local g = gradOutput[r]:contiguous():view(C, self.H * self.W)
    for k = 1, self.H * self.W do
      local at = idx[{ {}, k }]
      if at[1] >= 0 then   -- a bin is empty in every channel or in none
        flat:indexAdd(1, (at + channelBase):add(1), g[{ {}, k }]:contiguous())
      end
    end
  end
  self.gradInput = { self.gradInput_boxes, self.gradInput_rois }
  return self.gradInput
end

function ROIPooling:clearState()
  nn.utils.clear(self, 'gradInput_rois', 'gradInput_boxes')
  self.indices:set()
  return parent.clearState(self)
end

function ROIPooling:__tostring__()
  return ('%s(%d, %d, %g)'):format(torch.type(self), self.W, self.H, self.spatial_scale)
end
