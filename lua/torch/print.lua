-- Printing tensors as torch7 does: aligned columns, a common scale factor, a size footer.
local torch = require 'torch.env'

local function formatFor(values, integer)
  local maxabs, minabs, allInt = 0, math.huge, true
  for i = 1, #values do
    local v = values[i]
    if v ~= v or v == math.huge or v == -math.huge then
      allInt = false
    else
      local a = math.abs(v)
      if a > maxabs then maxabs = a end
      if a < minabs then minabs = a end
      if v ~= math.floor(v) then allInt = false end
    end
  end
  if #values == 0 then return '%g', 1 end
  if integer or allInt then
    local digits = maxabs > 0 and math.floor(math.log10(maxabs)) + 1 or 1
    if digits <= 9 then
      return '%' .. (digits + 1 + (integer and 0 or 0)) .. '.0f', 1
    end
    return '%' .. 12 .. '.4e', 1
  end
  local expMax = maxabs > 0 and math.floor(math.log10(maxabs)) + 1 or 1
  local expMin = minabs > 0 and minabs ~= math.huge and math.floor(math.log10(minabs)) + 1 or 1
  if expMax - expMin > 4 then
    return '%11.4e', 1
  end
  if expMax > 5 or expMax < -4 then
    return '%10.4f', 10 ^ (expMax - 1)
  end
  if expMax <= 0 then return '%10.4f', 1 end
  return '%' .. (expMax + 6) .. '.4f', 1
end

local function scaleHeader(scale)
  if scale == 1 then return '' end
  return ('%g *\n'):format(scale)
end

local function fmt(f, v, scale)
  if v ~= v then return (' nan'):format() end
  return f:format(v / scale)
end

local function matrixLines(t, f, scale, lines, indent)
  local rows, cols = t._sz[1], t._sz[2]
  for i = 1, rows do
    local row = {}
    for j = 1, cols do row[j] = fmt(f, t[i][j], scale) end
    lines[#lines + 1] = (indent or '') .. table.concat(row, ' ')
  end
end

function torch._tensorToString(t)
  local name = torch.typename(t)
  local nd = t:dim()
  if nd == 0 then return ('[%s with no dimension]\n'):format(name) end
  local values = {}
  local flat = t:contiguous():view(-1)
  for i = 1, flat:nElement() do values[i] = flat[i] end
  local f, scale = formatFor(values, t._dt.integer)
  local lines = {}
  local header = scaleHeader(scale)
  if nd == 1 then
    if header ~= '' then lines[#lines + 1] = header:sub(1, -2) end
    for i = 1, #values do lines[#lines + 1] = fmt(f, values[i], scale) end
  elseif nd == 2 then
    if header ~= '' then lines[#lines + 1] = header:sub(1, -2) end
    matrixLines(t, f, scale, lines)
  else
    -- every 2D slice over the leading dims, labelled (i,j,.,.)
    local lead = {}
    for d = 1, nd - 2 do lead[d] = 1 end
    while true do
      local label = {}
      local m = t
      for d = 1, nd - 2 do label[d] = tostring(lead[d]); m = m:select(1, lead[d]) end
      lines[#lines + 1] = '(' .. table.concat(label, ',') .. ',.,.) = '
      if header ~= '' then lines[#lines + 1] = header:sub(1, -2) end
      matrixLines(m, f, scale, lines)
      lines[#lines + 1] = ''
      local d = nd - 2
      while d >= 1 do
        lead[d] = lead[d] + 1
        if lead[d] <= t._sz[d] then break end
        lead[d] = 1
        d = d - 1
      end
      if d < 1 then break end
    end
    lines[#lines] = nil
  end
  lines[#lines + 1] = ('[%s of size %s]'):format(name, table.concat(t._sz, 'x'))
  return table.concat(lines, '\n') .. '\n'
end

torch._method('__tostring__', torch._tensorToString)
