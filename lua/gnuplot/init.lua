-- gnuplot: torch7's gnuplot package drawn with matplotlib (Agg) into files (luabridge/plotting.py).
-- A figure's state (content, title, labels, grid, axis, legend place, output) lives here and the
-- whole figure is redrawn after changes, as gnuplot refreshes its window (a file at most once a
-- second; plotflush draws at once). There are no windows:
-- a figure torch7 would show on screen is written to gnuplot_<n>.png in the current folder.
require 'torch'
require 'paths'

local missing = rawget(_G, '__luabridge_py').plot_missing()
if missing then error(missing, 2) end

gnuplot = rawget(_G, 'gnuplot') or {}

require 'gnuplot.figures'
require 'gnuplot.series'
require 'gnuplot.hist'

return gnuplot
