-- histc (counts in bins with their centres, and a text picture of them) and hist (histc drawn as bars).

-- the histogram as text: bars of '|' (tops '.', ':' or '|' by thirds), then every sixth centre
local function histogram_text(h, rows)
  rows = rows or 10
  local top = h[h.max].nb
  local step = top / (rows + 1)
  local lines = { ('nsamples:  min:(bin:%d/#%d/cntr:%2.2f)  max:(bin:%d/#%d/cntr:%2.2f)')
                  :format(h.min, h[h.min].nb, h[h.min].val, h.max, h[h.max].nb, h[h.max].val) }
  local ruler = '--------:' .. ('-'):rep(#h)
  lines[#lines + 1] = ruler
  local started = {}
  local level = top - step
  for _ = 1, rows do
    local cells = {}
    for j = 1, #h do
      if started[j] then
        cells[j] = '|'
      elseif h[j].nb < level then
        cells[j] = ' '
      else
        started[j] = true
        local third = (level + step - h[j].nb) / step
        cells[j] = third > 0.66 and '|' or (third > 0.33 and ':' or '.')
      end
    end
    lines[#lines + 1] = ('%1.2e:'):format(level) .. table.concat(cells)
    level = level - step
  end
  local marks, centres = {}, {}
  for j = 1, #h do
    local marked = (j - 2) % 6 == 0
    marks[j] = marked and '^' or '-'
    if marked then centres[#centres + 1] = (h[j].val < 0 and '-' or '+') .. ('%1.2f'):format(math.abs(h[j].val)) end
  end
  lines[#lines + 1] = '--------:' .. table.concat(marks)
  lines[#lines + 1] = 'centers ' .. table.concat(centres, ' ')
  return table.concat(lines, '\n')
end

-- the samples of histc and hist: a non-empty tensor (the error names fn's caller)
local function samples(fn, tensor)
  if not torch.isTensor(tensor) then error(('usage: %s (tensor [, nBins] [, min] [, max])'):format(fn), 3) end
  if tensor:nElement() == 0 then error(fn .. ': the tensor is empty', 3) end
  return tensor
end

-- histc(tensor [, bins = 72] [, min] [, max] [, raw]): raw counts, or a table of bins
-- {val = centre, nb = count} with raw, bins, binwidth, max and min (the fullest and emptiest bins)
function gnuplot.histc(tensor, bins, min, max, raw)
  samples('gnuplot.histc', tensor)
  bins = bins or 80 - 8
  min = min or tensor:min()
  max = max or tensor:max()
  local counts = torch.histc(tensor:double(), bins, min, max)
  if raw then return counts end
  local h = { raw = counts, bins = bins, binwidth = (max - min) / bins }
  for i = 1, bins do h[i] = { val = min + (i - 0.5) * h.binwidth, nb = counts[i] } end
  local _, fullest = torch.max(counts, 1)
  local _, emptiest = torch.min(counts, 1)
  h.max, h.min = fullest[1], emptiest[1]
  return setmetatable(h, { __tostring = histogram_text })
end

-- hist(tensor [, bins] [, min] [, max]): the histogram drawn as bars at the bin centres
function gnuplot.hist(tensor, bins, min, max)
  local h = gnuplot.histc(samples('gnuplot.hist', tensor), bins, min, max)
  local centres = torch.Tensor(#h)
  for i = 1, #h do centres[i] = h[i].val end
  gnuplot.bar(centres, h.raw)
  return h
end
