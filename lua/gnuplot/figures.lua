-- Figures and their settings: figure, pngfigure/epsfigure/svgfigure/pdffigure, figprint,
-- plotflush, close, closeall, title, xlabel, ylabel, zlabel, grid, logscale, movelegend, axis, raw.
local py = rawget(_G, '__luabridge_py')

local figures = {}     -- number -> state
local current = nil
local warned = false   -- about gnuplot.raw

-- Paths are made absolute when a figure is made: gnuplot drew from the folder it started in, and a
-- drawing may happen later (luabridge/plotting.py), after the script changed folder.
local function new_figure(n)
  local name = ('gnuplot_%d.png'):format(n)
  return { number = n, path = paths.concat(name), name = name, format = 'png', onscreen = true }
end

-- the current figure (a new one when there is none), as torch7's getCurrentPlot
function gnuplot._current()
  if current == nil then gnuplot.figure() end
  return figures[current]
end

-- draws fig into its file when it has something to show: at once when `now`, else within a
-- second (luabridge/plotting.py draws a file at most once a second, and at exit)
function gnuplot._refresh(fig, now)
  fig = fig or gnuplot._current()
  if not fig.kind then return end
  py.plot_draw(fig, now or false)
  if fig.onscreen and not fig.announced then
    fig.announced = true
    print(('gnuplot: no window in luabridge; figure %d is drawn into %s'):format(fig.number, fig.name))
  end
end

function gnuplot.figure(n, config)
  if n ~= nil and type(n) ~= 'number' then error('gnuplot.figure: figure number expected, got ' .. type(n), 2) end
  n = n or #figures + 1
  figures[n] = figures[n] or new_figure(n)
  current = n
  return n
end

local FORMATS = { png = 'png', eps = 'eps', svg = 'svg', pdf = 'pdf' }

local function filefigure(fn, format, fname, n)
  if type(fname) ~= 'string' then error(fn .. ': file name expected, got ' .. type(fname), 3) end
  local dir = paths.dirname(fname)
  if dir == '' then dir = '.' end
  if not paths.dirp(dir) then error('cannot save to ' .. fname .. ': directory does not exist', 3) end
  local number = gnuplot.figure(n)
  local fig = figures[number]
  fig.path, fig.format, fig.onscreen = paths.concat(fname), format, false
  return number
end

function gnuplot.pngfigure(fname, n) return filefigure('gnuplot.pngfigure', 'png', fname, n) end
function gnuplot.epsfigure(fname, n) return filefigure('gnuplot.epsfigure', 'eps', fname, n) end
function gnuplot.svgfigure(fname, n) return filefigure('gnuplot.svgfigure', 'svg', fname, n) end
function gnuplot.pdffigure(fname, n) return filefigure('gnuplot.pdffigure', 'pdf', fname, n) end

-- writes the current figure to fname too (format from its suffix: eps, png, pdf or svg)
function gnuplot.figprint(fname)
  local format = type(fname) == 'string' and FORMATS[(fname:match('%.(%w+)$') or ''):lower()]
  if not format then error('gnuplot.figprint: only eps, png, pdf and svg files, got ' .. tostring(fname), 2) end
  local fig = gnuplot._current()
  local copy = setmetatable({ path = fname, format = format }, { __index = fig })
  if fig.kind then py.plot_draw(copy, true) end
end

function gnuplot.plotflush(n)
  n = n or current
  if not n or figures[n] == nil then
    print('no figure ' .. tostring(n))
    return
  end
  gnuplot._refresh(figures[n], true)
end

function gnuplot.close(n)
  n = n or current
  local fig = figures[n]
  if fig == nil then return end
  gnuplot._refresh(fig)
  figures[n] = nil
  if current == n then current = nil end
end

function gnuplot.closeall()
  for n in pairs(figures) do figures[n] = nil end
  current = nil
end

-- one setting of the current figure, then a redraw
local function setting(key, value)
  local fig = gnuplot._current()
  fig[key] = value
  gnuplot._refresh(fig)
end

local function label(fn, key)
  return function(text)
    if type(text) ~= 'string' and type(text) ~= 'number' then error(fn .. ': string expected, got ' .. type(text), 2) end
    setting(key, tostring(text))
  end
end
gnuplot.title = label('gnuplot.title', 'title')
gnuplot.xlabel = label('gnuplot.xlabel', 'xlabel')
gnuplot.ylabel = label('gnuplot.ylabel', 'ylabel')
gnuplot.zlabel = label('gnuplot.zlabel', 'zlabel')

-- grid / logscale: on for any true value except false and 'off'
local function toggle(v) return v ~= nil and v ~= false and v ~= 'off' end
function gnuplot.grid(on) setting('grid', toggle(on)) end
function gnuplot.logscale(on) setting('logscale', toggle(on)) end

function gnuplot.movelegend(hloc, vloc)
  if hloc ~= 'left' and hloc ~= 'right' and hloc ~= 'center' then
    error('gnuplot.movelegend: horizontal location must be left, right or center, got ' .. tostring(hloc), 2)
  end
  if vloc ~= 'bottom' and vloc ~= 'top' and vloc ~= 'middle' then
    error('gnuplot.movelegend: vertical location must be bottom, top or middle, got ' .. tostring(vloc), 2)
  end
  setting('legend', hloc .. ' ' .. vloc)
end

-- axis('auto' | 'image' | 'equal' | 'fill' | {xmin, xmax, ymin, ymax})
function gnuplot.axis(axis)
  if type(axis) == 'table' then
    if #axis ~= 4 then print('axis should have 4 componets {xmin,xmax,ymin,ymax}'); return end
    local fig = gnuplot._current()
    fig.limits = { axis[1], axis[2], axis[3], axis[4] }
    gnuplot._refresh(fig)
  elseif axis == 'auto' then
    local fig = gnuplot._current()
    fig.limits, fig.aspect = nil, nil
    gnuplot._refresh(fig)
  elseif axis == 'image' or axis == 'equal' then
    setting('aspect', 'equal')
  elseif axis == 'fill' then
    setting('aspect', 'square')
  else
    error("gnuplot.axis: 'auto', 'image', 'equal', 'fill' or {xmin, xmax, ymin, ymax} expected, got " .. tostring(axis), 2)
  end
end

-- gnuplot commands have no matplotlib meaning: accepted and ignored, with one warning
function gnuplot.raw(str)
  if warned then return end
  warned = true
  print('gnuplot.raw: gnuplot commands are ignored in luabridge (figures are drawn with matplotlib)')
end

-- the gnuplot program is not used: these settings are accepted and ignored
function gnuplot.setgnuplotexe() end
function gnuplot.setterm() end
