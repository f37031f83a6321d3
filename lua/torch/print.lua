-- Printing tensors and storages exactly as torch7 does: one printf format and one common scale
-- factor for all the values, matrices split into "Columns a to b" blocks at 80 characters,
-- 3D+ tensors as 2D slices labelled (i,j,.,.), and a "[type of size AxB]" footer.
local torch = require 'torch.env'

local LINE_WIDTH = 80

-- Digits before the decimal point as torch7 counts them (1 for zero, negative below 0.1).
local function magnitude(x)
  if x == 0 then return 1 end
  return math.floor(math.log10(x)) + 1
end

-- The format, scale and column width for the n doubles at p (torch7's choice):
-- integers print with %d (wide enough for the largest), other values with %.4f, scaled by a
-- power of ten when they are all large or all small, or with %.4e when they span more than
-- four orders of magnitude. A NaN anywhere makes torch7 fall back to a plain '%f' with no
-- column blocks (width nil).
local function layout(p, n)
  if n == 0 then return '', 1, 0 end
  local integral, minAbs, maxAbs = true, math.huge, 0
  for i = 0, n - 1 do
    local v = p[i]
    if v ~= v then return '%f', 1, nil end
    if v ~= math.ceil(v) then integral = false end
    local a = math.abs(v)
    if a < minAbs then minAbs = a end
    if a > maxAbs then maxAbs = a end
  end
  local expMin, expMax = magnitude(minAbs), magnitude(maxAbs)
  if integral then
    if expMax > 9 then return '%11.4e', 1, 11 end
    return '%' .. (expMax + 1) .. 'd', 1, expMax + 1
  end
  if expMax - expMin > 4 then
    local width = (math.abs(expMax) > 99 or math.abs(expMin) > 99) and 12 or 11
    return '%' .. width .. '.4e', 1, width
  end
  if expMax > 5 or expMax < 0 then return '%7.4f', 10 ^ (expMax - 1), 7 end
  local width = expMax == 0 and 7 or expMax + 6
  return '%' .. width .. '.4f', 1, width
end

local function scaleLine(scale) return ('%g *\n'):format(scale) end

-- A contiguous DoubleTensor copy of t (any type or device): the values torch7 prints.
local function asDouble(t)
  local sz = {}
  for d = 1, #t._sz do sz[d] = t._sz[d] end
  return torch.DoubleTensor():resize(sz):copy(t)
end

local function dataOf(d) return d._st and d._st._ptr + d._off end

-- One value per line, under the scale line (1D tensors and storages).
local function columnString(p, n, fmt, scale)
  local out = {}
  if scale ~= 1 then out[1] = scaleLine(scale) end
  for i = 0, n - 1 do out[#out + 1] = fmt:format(p[i] / scale) .. '\n' end
  return table.concat(out)
end

-- The contiguous rows x cols matrix at p, each line after an indent;
-- columns go in blocks that fit the line width, each block under a "Columns a to b" line.
-- As in torch7, every block repeats the scale line and rows under a scale get one more space.
local function matrixString(p, rows, cols, fmt, scale, width, indent)
  local perLine = width and math.floor((LINE_WIDTH - #indent) / (width + 1)) or cols
  local rowIndent = scale ~= 1 and indent .. ' ' or indent
  local out = { indent }
  local first = 1
  while first <= cols do
    local last = math.min(first + perLine - 1, cols)
    if perLine < cols then
      if first ~= 1 then out[#out + 1] = '\n' end
      out[#out + 1] = ('Columns %d to %d\n%s'):format(first, last, indent)
    end
    if scale ~= 1 then out[#out + 1] = scaleLine(scale) .. ' ' .. indent end
    for r = 0, rows - 1 do
      local cells = {}
      for c = first - 1, last - 1 do cells[#cells + 1] = fmt:format(p[r * cols + c] / scale) end
      out[#out + 1] = table.concat(cells, ' ') .. '\n'
      if r < rows - 1 then out[#out + 1] = rowIndent end
    end
    first = last + 1
  end
  return table.concat(out)
end

-- The 2D slices of a 3D+ contiguous tensor, labelled "(i,j,.,.) = ". Like torch7, the first
-- leading index varies fastest.
local function slicesString(d, p, fmt, scale, width)
  local sz, nd = d._sz, #d._sz
  local rows, cols = sz[nd - 1], sz[nd]
  local count = 1
  for k = 1, nd - 2 do count = count * sz[k] end
  local out = {}
  for s = 0, count - 1 do
    local label, off, rest = {}, 0, s
    for k = 1, nd - 2 do
      local i = rest % sz[k]
      rest = (rest - i) / sz[k]
      label[k] = i + 1
      off = off + i * d._str[k]
    end
    if s > 0 then out[#out + 1] = '\n' end
    out[#out + 1] = '(' .. table.concat(label, ',') .. ',.,.) = \n'
    out[#out + 1] = matrixString(p + off, rows, cols, fmt, scale, width, ' ')
  end
  return table.concat(out)
end

function torch._tensorToString(t)
  local name = torch.typename(t)
  local nd = #t._sz
  if nd == 0 then return ('[%s with no dimension]\n'):format(name) end
  local d = asDouble(t)
  local p, n = dataOf(d), d:nElement()
  local fmt, scale, width = layout(p, n)
  local body
  if n == 0 then
    body = ''   -- zero-size dims: only the footer
  elseif nd == 1 then
    body = columnString(p, t._sz[1], fmt, scale)
  elseif nd == 2 then
    body = matrixString(p, t._sz[1], t._sz[2], fmt, scale, width, '')
  else
    body = slicesString(d, p, fmt, scale, width)
  end
  return ('%s[%s of size %s]\n'):format(body, name, table.concat(t._sz, 'x'))
end

function torch._storageToString(s)
  local n = s:size()
  local d = asDouble(torch[s._dt.name .. 'Tensor'](s))
  local p = dataOf(d)
  local fmt, scale = layout(p, n)
  return ('%s[%s of size %d]\n'):format(columnString(p, n, fmt, scale), torch.typename(s), n)
end

torch._method('__tostring__', torch._tensorToString)
for _, mt in pairs(torch._storageMetatables) do mt.__tostring__ = torch._storageToString end
