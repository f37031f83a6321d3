-- What a figure shows: plot (curves), bar, splot (surfaces), scatter3 (3D points) and imagesc
-- (a matrix as an image), with torch7's argument forms. Data are copied into contiguous doubles,
-- which luabridge/plotting.py reads in place.
local function istensor(v) return torch.isTensor(v) end

local function doubles(t) return torch.DoubleTensor(t:size()):copy(t) end

local PLOT_USAGE = 'expecting [string,] tensor [,tensor] [,string]'

-- one curve: {[legend,] x [, y] [, style]} -> legend, x, y, style (torch7's getvars)
local function curve(t)
  local legend, x, y, style
  local n = #t
  if n == 0 then error('gnuplot.plot: empty argument list', 3) end
  local i = 1
  if type(t[1]) == 'string' then legend, i = t[1], 2 end
  if not istensor(t[i]) then error('gnuplot.plot: ' .. PLOT_USAGE, 3) end
  x, i = t[i], i + 1
  if istensor(t[i]) then y, i = t[i], i + 1 end
  if type(t[i]) == 'string' then style, i = t[i], i + 1 end
  if i <= n then error('gnuplot.plot: ' .. PLOT_USAGE, 3) end
  style = style or ''
  if not y then
    if x:dim() == 2 and x:size(2) == 2 then
      x, y = x:select(2, 1), x:select(2, 2)
    elseif x:dim() == 2 and x:size(2) == 4 and (style == 'v' or style == 'V' or style == 'vectors') then
      x, y = x:index(2, torch.LongTensor({ 1, 3 })), x:index(2, torch.LongTensor({ 2, 4 }))
    elseif x:dim() == 2 and x:size(2) > 1 then
      x, y = x:select(2, 1), x:narrow(2, 2, x:size(2) - 1)
    else
      y = x:view(-1)
      x = torch.range(1, y:size(1))
    end
  end
  if (x:dim() ~= 1 and x:dim() ~= 2) or y:size(1) ~= x:size(1) then
    error(('gnuplot.plot: x and y dims are wrong: x = %dD (%d rows), y = %dD (%d rows)')
          :format(x:dim(), x:size(1), y:dim(), y:size(1)), 3)
  end
  return { legend = legend or '', x = doubles(x), y = doubles(y), style = style }
end

-- plot(...) / splot(...) argument lists: one set of arguments, a list of tables, or a table of tables
local function each_set(args)
  if type(args[1]) == 'table' and not istensor(args[1]) then
    if type(args[1][1]) == 'table' and not istensor(args[1][1]) then args = args[1] end
    return args
  end
  return { args }
end

local function show(kind, fields)
  local fig = gnuplot._current()
  fig.kind, fig.series, fig.matrix, fig.palette = kind, fields.series, fields.matrix, fields.palette
  gnuplot._refresh(fig)
end

-- gnuplot.<kind>(...): each argument set read by parse, the list shown
local function drawing(kind, parse, needs)
  return function(...)
    if select('#', ...) == 0 then error(('gnuplot.%s: no inputs, expecting %s'):format(kind, needs), 2) end
    local series = {}
    for i, set in ipairs(each_set({ ... })) do series[i] = parse(set) end
    show(kind, { series = series })
  end
end

-- plot(x), plot(x, '.'), plot(x, y, '-'), plot('name', x, y, '+-'), plot({...}, {...}), plot({{...}, {...}})
gnuplot.plot = drawing('plot', curve, 'at least a vector')

-- bar(y), bar(x, y): plot with boxes
function gnuplot.bar(...)
  local args = { ... }
  args[#args + 1] = '|'
  gnuplot.plot(args)
end

local SPLOT_USAGE = 'expecting [string,] tensor [,tensor] [,tensor]'

-- one surface: {[legend,] z} or {[legend,] x, y, z} with matrices (z alone: x, y are row/column numbers)
local function surface(t)
  local legend, i = '', 1
  if type(t[1]) == 'string' then legend, i = t[1], 2 end
  local x, y, z = t[i], t[i + 1], t[i + 2]
  if not istensor(x) or (y ~= nil and not istensor(y)) or (y ~= nil and not istensor(z)) or t[i + 3] ~= nil then
    error('gnuplot.splot: ' .. SPLOT_USAGE, 3)
  end
  if y == nil then
    z = x
    if z:dim() ~= 2 then error('gnuplot.splot: z must be a matrix, got ' .. z:dim() .. 'D', 3) end
    x = torch.range(1, z:size(1)):view(-1, 1):expand(z:size(1), z:size(2))
    y = torch.range(1, z:size(2)):view(1, -1):expand(z:size(1), z:size(2))
  end
  if x:dim() ~= 2 or y:dim() ~= 2 or z:dim() ~= 2 then
    error(('gnuplot.splot: x and y and z are expected to be matrices x = %dD y = %dD z = %dD')
          :format(x:dim(), y:dim(), z:dim()), 3)
  end
  if not (x:isSameSizeAs(z) and y:isSameSizeAs(z)) then error('gnuplot.splot: x, y and z must have the same size', 3) end
  return { legend = legend, x = doubles(x), y = doubles(y), z = doubles(z) }
end

-- splot(z), splot(x, y, z), splot('name', x, y, z), splot({...}, {...})
gnuplot.splot = drawing('splot', surface, 'at least a matrix')

-- one point set: {[legend,] x, y, z} with vectors of one size
local function points(t)
  local legend, j = '', 1
  if type(t[1]) == 'string' then legend, j = t[1], 2 end
  local x, y, z = t[j], t[j + 1], t[j + 2]
  if not (istensor(x) and istensor(y) and istensor(z)) or t[j + 3] ~= nil then
    error('gnuplot.scatter3: expecting [string,] tensor, tensor, tensor', 3)
  end
  if x:dim() ~= 1 or not (x:isSameSizeAs(y) and x:isSameSizeAs(z)) then
    error('gnuplot.scatter3: x, y and z must be 1D and the same size', 3)
  end
  return { legend = legend, x = doubles(x), y = doubles(y), z = doubles(z) }
end

-- scatter3(x, y, z), scatter3('name', x, y, z), scatter3({...}, {...}): 3D points
gnuplot.scatter3 = drawing('scatter3', points, 'three vectors')

-- imagesc(matrix [, palette]): palette 'gray' (default), 'color', or a matplotlib colormap name
function gnuplot.imagesc(x, palette, ...)
  if not istensor(x) or select('#', ...) > 0 or (palette ~= nil and type(palette) ~= 'string') then
    error('gnuplot.imagesc: expecting tensor [,string]', 2)
  end
  if x:dim() ~= 2 then error('gnuplot.imagesc: x is expected to be a matrix, got ' .. x:dim() .. 'D', 2) end
  palette = palette or 'gray'
  if not rawget(_G, '__luabridge_py').plot_palette_known(palette) then
    -- torch7 sends 'set palette <palette>' down gnuplot's pipe: gnuplot complains on its stderr
    -- and keeps its palette, the Lua program goes on (practical4's main.lua passes a model's name)
    io.stderr:write(("gnuplot.imagesc: unknown palette '%s' (use 'gray', 'color' or a matplotlib colormap name): drawn in gray\n"):format(palette))
    palette = 'gray'
  end
  show('imagesc', { matrix = doubles(x), palette = palette })
end
