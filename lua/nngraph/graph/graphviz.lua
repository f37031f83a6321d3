-- Graphs as Graphviz text (Graph:todot) and files: graph.dot writes name.dot, then renders
-- name.svg with Graphviz's `dot` program when it is installed (a clear error when it is not).

-- A dot identifier or a quoted string (newlines as \n, quotes escaped; other backslashes kept,
-- as labels use dot's \l).
function graph._dotEscape(s)
  if not s:find('[^%a]') then return s end
  return '"' .. s:gsub('\n', '\\n'):gsub('"', '\\"') .. '"'
end

-- ' key=value ...' in key order.
local function attributeString(attributes)
  local keys = {}
  for k in pairs(attributes) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = k .. '=' .. graph._dotEscape(tostring(attributes[k])) end
  return table.concat(parts, ' ')
end

-- The dot text of nodes (label text, attributes) and edges (pairs of ids).
function graph._dotText(title, nodes, edges)
  local out = { 'digraph G {\n' }
  if title then out[#out + 1] = ('labelloc="t";\nlabel=%s;\n'):format(graph._dotEscape(title)) end
  out[#out + 1] = 'node [shape = oval];'
  for _, n in ipairs(nodes) do
    local attributes = { label = n.label }
    for k, v in pairs(n.attributes or {}) do attributes[k] = attributes[k] or v end
    out[#out + 1] = ('\nn%d[%s];'):format(n.id, attributeString(attributes))
  end
  out[#out + 1] = '\n'
  for _, e in ipairs(edges) do out[#out + 1] = ('n%d -> n%d;\n'):format(e[1], e[2]) end
  out[#out + 1] = '}'
  return table.concat(out)
end

local function shellQuote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

function graph.hasGraphviz()
  local status = os.execute('command -v dot >/dev/null 2>&1')
  return status == 0 or status == true
end

-- Renders a .dot file as `format` (svg, png, pdf, ... as Graphviz names them) with a layout
-- engine (default 'dot').
function graph._render(dotPath, outPath, format, engine)
  if not graph.hasGraphviz() then
    error(('graph: rendering %s needs Graphviz: its `dot` program is not on PATH '
           .. '(install Graphviz, e.g. apt-get install graphviz)'):format(outPath), 0)
  end
  local cmd = ('dot -K%s -T%s -o %s %s'):format(engine or 'dot', format, shellQuote(outPath), shellQuote(dotPath))
  local status = os.execute(cmd)
  if not (status == 0 or status == true) then error('graph: Graphviz failed: ' .. cmd, 0) end
end

function graph._writeFile(path, text)
  local f, err = io.open(path, 'w')
  if not f then error('graph: cannot write ' .. tostring(err), 0) end
  f:write(text)
  f:close()
end

-- Writes fname.dot and renders fname.svg.
function graph._writeDotAndSvg(dotText, fname)
  graph._writeFile(fname .. '.dot', dotText)
  graph._render(fname .. '.dot', fname .. '.svg', 'svg')
end

-- graph.dot(g, title, fname): fname.dot (g:todot(title)) and fname.svg. torch7 opens a Qt window
-- when fname is omitted; here fname is needed.
function graph.dot(g, title, fname)
  if type(fname) ~= 'string' then
    error('graph.dot(g, title, fname): fname (a path without extension) is needed; '
          .. 'showing graphs in a Qt window is not supported', 2)
  end
  graph._writeDotAndSvg(g:todot(title), fname)
end

-- Renders g:todot() to outPath as `format`, laid out by `algorithm` (a Graphviz engine: dot,
-- neato, circo, ...).
local function renderGraph(g, algorithm, outPath, format)
  local dotPath = os.tmpname()
  graph._writeFile(dotPath, g:todot())
  local ok, err = pcall(graph._render, dotPath, outPath, format, algorithm)
  os.remove(dotPath)
  if not ok then error(err, 0) end
end

-- Renders the graph to fname, in the format its extension names (.svg, .png, .pdf, .dot ...).
function graph.graphvizFile(g, algorithm, fname)
  local format = type(fname) == 'string' and fname:match('%.(%w+)$')
  if not format then error('graph.graphvizFile: fname needs an extension naming the format, got ' .. tostring(fname), 2) end
  renderGraph(g, algorithm, fname, format)
end

-- The nodes' positions as laid out by `algorithm` (default dot): row i holds node i's x and y,
-- each in [0, 1] of the drawing's width and height (y upwards).
function graph.graphvizLayout(g, algorithm)
  local plainPath = os.tmpname()
  local ok, err = pcall(renderGraph, g, algorithm, plainPath, 'plain')
  local f = ok and io.open(plainPath)
  local text = f and f:read('*a')
  if f then f:close() end
  os.remove(plainPath)
  if not ok then error(err, 0) end
  local width, height = text:match('^graph %S+ (%S+) (%S+)')
  local positions = torch.zeros(#g.nodes, 2)
  for id, x, y in text:gmatch('\nnode n(%d+) (%S+) (%S+)') do
    positions[tonumber(id)][1] = tonumber(x) / tonumber(width)
    positions[tonumber(id)][2] = tonumber(y) / tonumber(height)
  end
  return positions
end
