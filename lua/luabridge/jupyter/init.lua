-- The Lua half of luabridge/jupyter/ (the %%lua magic and the Lua kernel): Lua's output sent to
-- the notebook through Python (print, io.write, io.stdout, io.stderr), pictures shown inline
-- (itorch.image, itorch.Plot, image.display, gnuplot's on-screen figures), itorch.html and
-- itorch.text; results laid out as th prints them.
local jupyter = {}

local out        -- Python: out(stream, text) writes to the notebook's stdout or stderr
local show       -- Python: show(kind, value) displays 'png' (a tensor), 'file' (a PNG file), 'html', 'text'
local realStdout, realStderr = io.stdout, io.stderr
local dirty = {}         -- gnuplot's on-screen figures changed since the last flush
local hooked = {}        -- modules whose display functions show inline already

local function concat(...)
   local parts = {}
   for i = 1, select('#', ...) do
      local v = select(i, ...)
      if type(v) ~= 'string' and type(v) ~= 'number' then
         error(("bad argument #%d to 'write' (string expected, got %s)"):format(i, type(v)), 3)
      end
      parts[i] = tostring(v)
   end
   return table.concat(parts)
end

-- A stand-in for io.stdout / io.stderr: write and flush go to the notebook, the rest to the file.
local function stream(name, real)
   local s = {}
   function s.write(self, ...)
      out(name, concat(...))
      return self
   end
   function s.flush() return true end
   return setmetatable(s, { __index = function(_, k)
      local f = real[k]
      if type(f) ~= 'function' then return f end
      return function(self, ...) return f(real, ...) end
   end, __tostring = function() return tostring(real) end })
end

-- print as Lua's, through the notebook (th's layout print, when installed, writes with io.write)
function jupyter.print(...)
   local parts = {}
   for i = 1, select('#', ...) do parts[i] = tostring((select(i, ...))) end
   out('stdout', table.concat(parts, '\t') .. '\n')
end

-- itorch ---------------------------------------------------------------------------------------

local itorch = {}

-- itorch.image(img): a tensor (HxW, CxHxW, or a batch NxCxHxW) or a table of them, as one picture
function itorch.image(img, opts)
   if type(img) == 'table' and not torch.isTensor(img) or torch.isTensor(img) and img:dim() == 4 then
      require 'image'
      local args = { input = img, padding = 2 }
      for k, v in pairs(opts or {}) do args[k] = v end
      img = image.toDisplayTensor(args)
   end
   if not torch.isTensor(img) or (img:dim() ~= 2 and img:dim() ~= 3) then
      error('itorch.image: expected a HxW, CxHxW or NxCxHxW tensor or a table of tensors, got '
            .. (torch.isTensor(img) and img:dim() .. 'D tensor' or torch.type(img)), 2)
   end
   show('png', img)
end

function itorch.html(html) show('html', tostring(html)) end
function itorch.text(text) show('text', tostring(text)) end

-- itorch.Plot: iTorch's plotting calls (circle, line, histogram, title, axes, legend, draw, save),
-- drawn by luabridge's gnuplot (matplotlib).
local Plot = {}
Plot.__index = Plot
setmetatable(Plot, { __call = function(cls) return setmetatable({ series = {}, labels = {} }, cls) end })
itorch.Plot = Plot

local function add(self, x, y, style, legend)
   self.series[#self.series + 1] = { legend or '', x, y, style }
   return self
end
function Plot:circle(x, y, _, legend) return add(self, x, y, '+', legend) end
function Plot:line(x, y, _, legend) return add(self, x, y, '-', legend) end
function Plot:histogram(x, bins, min, max)
   require 'gnuplot'
   local counts = torch.histc(x:double(), bins or 100, min or 0, max or 0)
   local lo, hi = min or x:min(), max or x:max()
   local width = (hi - lo) / counts:size(1)
   local centres = torch.range(0, counts:size(1) - 1):mul(width):add(lo + width / 2)
   self.bars = { centres, counts }
   return self
end
function Plot:title(t) self.labels.title = t return self end
function Plot:xaxis(t) self.labels.x = t return self end
function Plot:yaxis(t) self.labels.y = t return self end
function Plot:legend(on) self.labels.legend = on return self end

-- draws into the PNG file `path` (gnuplot's pngfigure), closing the figure after
function Plot:save(path)
   require 'gnuplot'
   local n = gnuplot.pngfigure(path)
   if self.bars then gnuplot.bar(self.bars[1], self.bars[2]) end
   if #self.series > 0 then gnuplot.plot(self.series) end
   if self.labels.title then gnuplot.title(self.labels.title) end
   if self.labels.x then gnuplot.xlabel(self.labels.x) end
   if self.labels.y then gnuplot.ylabel(self.labels.y) end
   gnuplot.plotflush(n)
   gnuplot.close(n)
   return self
end

-- shows the figure below the cell (nothing returned: a cell ending in draw() shows no table)
function Plot:draw()
   local path = os.tmpname()
   self:save(path)
   show('file', path)
end
Plot.redraw = Plot.draw

jupyter.itorch = itorch

-- image.display and gnuplot: inline, not files -------------------------------------------------

local function hookImage()
   local plainDisplay = image.display
   function image.display(...)
      local save, say = image.save, print
      image.save = function(_, grid) show('png', grid) end   -- the grid display would write
      print = function() end                                -- its 'saved to' line
      local ok, result = pcall(plainDisplay, ...)
      image.save, print = save, say
      if not ok then error(result, 0) end
      return result
   end
end

local function hookGnuplot()
   local py = rawget(_G, '__luabridge_py')
   local refresh = gnuplot._refresh
   function gnuplot._refresh(fig, now)
      fig = fig or gnuplot._current()
      if not fig.onscreen then return refresh(fig, now) end
      fig.announced = true     -- no 'drawn into a file' line: the figure shows below the cell
      dirty[fig] = true
      if now then jupyter.flush() end
   end
   jupyter.drawFigure = function(fig)
      local path = os.tmpname()
      py.plot_draw(setmetatable({ path = path, format = 'png', onscreen = false }, { __index = fig }), true)
      show('file', path)
   end
end

-- the display functions of the modules loaded so far, made to show inline (once each)
function jupyter.hook()
   if not hooked.image and type(rawget(_G, 'image')) == 'table' and image.display then
      hooked.image = true
      hookImage()
   end
   if not hooked.gnuplot and type(rawget(_G, 'gnuplot')) == 'table' and gnuplot._refresh then
      hooked.gnuplot = true
      hookGnuplot()
   end
end

-- shows gnuplot's on-screen figures changed since the last flush (at each cell's end)
function jupyter.flush()
   local figures = dirty
   dirty = {}
   for fig in pairs(figures) do
      if fig.kind then jupyter.drawFigure(fig) end
   end
end

-- install(out, show): Lua's output goes to the notebook from now on, itorch is a global, and
-- `require` makes the display functions of image and gnuplot show inline once loaded.
local installed = false
function jupyter.install(write, display)
   out, show = write, display
   if installed then return end
   installed = true
   io.stdout, io.stderr = stream('stdout', realStdout), stream('stderr', realStderr)
   io.write = function(...) out('stdout', concat(...)) return io.stdout end
   io.flush = function() return true end
   print = jupyter.print
   rawset(_G, 'itorch', itorch)
   package.loaded.itorch = itorch
   local plainRequire = require
   require = function(...)
      local m = plainRequire(...)
      jupyter.hook()
      return m
   end
   jupyter.hook()
end

-- run(fn): fn's results as a count and a table (nils kept)
function jupyter.run(fn)
   local function pack(...) return select('#', ...), { ... } end
   return pack(fn())
end

-- The text th prints for a value (its print laid out: tables over lines, tensors in full).
function jupyter.text(layoutPrint, v)
   local parts, write = {}, io.write
   io.write = function(...)
      for i = 1, select('#', ...) do parts[#parts + 1] = tostring((select(i, ...))) end
   end
   local ok, err = pcall(layoutPrint, v)
   io.write = write
   if not ok then error(err, 0) end
   return (table.concat(parts):gsub('\n$', ''))
end

return jupyter
