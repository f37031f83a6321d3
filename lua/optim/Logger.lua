-- Logs rows of named numbers (or strings) to a text file, tab separated, one header line of names.
--   logger = optim.Logger('train.log'); logger:setNames{'train', 'test'}; logger:add{0.5, 0.6}
--   or logger:add{['train'] = 0.5, ['test'] = 0.6} without setNames.
-- plot([name, ...]) draws the columns with two values or more (all, or those named) through the
-- gnuplot package, as torch7's: on screen unless display(false), and into name .. '.eps' for a
-- file logger; without a loadable gnuplot package it prints a note once and returns.
require 'paths'
local Logger = torch.class('optim.Logger')

function Logger:__init(filename, timestamp)
  if filename then
    self.name = filename
    local dir = paths.dirname(filename)
    if not paths.dirp(dir) then paths.mkdir(dir) end
    if timestamp then filename = filename .. '-' .. os.date('%Y_%m_%d_%X') end
    self.file = assert(io.open(filename, 'w'))
    self.epsfile = self.name .. '.eps'
  else
    self.file = io.stdout
    self.name = 'stdout'
    print('<Logger> warning: no path provided, logging to std out')
  end
  self.empty = true
  self.symbols, self.styles, self.names, self.idx = {}, {}, {}, {}
  self.showPlot = true
  self.defaultStyle = '+'
  self.logscale = false
end

-- The header line; keys are the column names (or indices when setNames was used), in order.
function Logger:_header(keys)
  self.empty, self.columns = false, keys
  for _, key in ipairs(keys) do
    self.file:write(self.names[key] .. '\t')
    self.symbols[key] = {}
    self.styles[key] = { self.defaultStyle }
  end
  self.file:write('\n')
  self.file:flush()
end

function Logger:setNames(names)
  self.names, self.nsymbols = names, #names
  local keys = {}
  for k, name in ipairs(names) do keys[k] = k; self.idx[name] = k end
  self:_header(keys)
  return self
end

-- One row: values by column (indices after setNames, names otherwise), written in column order.
function Logger:add(symbols)
  for _, v in pairs(symbols) do
    if type(v) ~= 'number' and type(v) ~= 'string' then error('<Logger> can only log numbers and strings', 2) end
  end
  if self.empty then   -- the first row names the columns after its keys
    local keys = {}
    for k in pairs(symbols) do keys[#keys + 1] = k; self.names[k] = k end
    self.nsymbols, self.idx = #keys, self.names
    self:_header(keys)
  end
  for k in pairs(symbols) do
    if not self.symbols[k] then error('<Logger> unknown column ' .. tostring(k), 2) end
  end
  local cells = {}
  for _, key in ipairs(self.columns) do
    local v = symbols[key]
    if v ~= nil then
      cells[#cells + 1] = type(v) == 'number' and ('%11.4e'):format(v) or v
      table.insert(self.symbols[key], v)
    end
  end
  self.file:write(table.concat(cells, '\t') .. '\t\n')
  self.file:flush()
end

function Logger:style(symbols)
  for name, style in pairs(symbols) do
    if type(style) == 'string' then self.styles[name] = { style }
    elseif type(style) == 'table' then self.styles[name] = style
    else error('<Logger> style should be a string or a table of strings', 2) end
  end
  return self
end

function Logger:setlogscale(on) self.logscale = on end
function Logger:display(on) self.showPlot = on end

-- The gnuplot series of the columns `keys`: {name, values, style} per style of each column.
function Logger:_series(keys)
  local plots = {}
  for _, key in ipairs(keys) do
    local list = self.symbols[key]
    if list and #list > 1 then
      local values = torch.Tensor(#list)
      for i, v in ipairs(list) do values[i] = v end
      for _, style in ipairs(self.styles[key]) do plots[#plots + 1] = { self.names[key], values, style } end
    end
  end
  return plots
end

function Logger:_draw(gnuplot, plots)
  if self.logscale then gnuplot.logscale('on') end
  gnuplot.plot(plots)
  if self.plotRawCmd then gnuplot.raw(self.plotRawCmd) end
  gnuplot.grid('on')
  gnuplot.title('<Logger::' .. self.name .. '>')
end

function Logger:plot(...)
  local ok, gnuplot = pcall(require, 'gnuplot')
  if __luabridge_interrupt(gnuplot) then error(gnuplot, 0) end   -- Ctrl-C is no missing gnuplot
  if not ok or type(gnuplot) ~= 'table' then
    if not self.warned then
      print('<Logger> warning: plotting is not available in luabridge (no gnuplot); the log file has the data')
      self.warned = true
    end
    return
  end
  local keys = self.columns or {}
  if select('#', ...) > 0 then
    keys = {}
    for i, name in ipairs({ ... }) do keys[i] = self.idx[name] end
  end
  local plots = self:_series(keys)
  if #plots == 0 then return end
  if self.showPlot then
    self.figure = gnuplot.figure(self.figure)
    self:_draw(gnuplot, plots)
  end
  if self.epsfile then   -- drawn within a second (gnuplot draws a file at most once a second)
    local eps = gnuplot.epsfigure(self.epsfile)
    self:_draw(gnuplot, plots)
    gnuplot.close(eps)
  end
end
