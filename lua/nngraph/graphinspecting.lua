-- Looking into graphs: nngraph.setDebug (a failing gModule draws its graph, the failing node in
-- red), nngraph.annotateNodes (nodes named after the local variables holding them) and
-- nngraph.display.
local paths = require 'paths'

local eachNode = nn.gModule._eachNode

local function withTraceback(message)
  if type(message) == 'string' and not message:find('stack traceback:\n', 1, true) then
    return debug.traceback(message, 2)
  end
  return message
end

-- Writes <name>.dot (the forward graph, failedNode filled red) and <name>.svg when Graphviz
-- is there; <name> is gmodule.name or nngraph_<n>in_<m>out, made unique if that svg exists.
local function drawFailure(gmodule, failedNode)
  local prefix = gmodule.name or ('nngraph_%din_%dout'):format(gmodule.nInputs or #gmodule.innode.children,
                                                               #gmodule.outnode.children)
  if paths.filep(prefix .. '.svg') then prefix = prefix .. '_' .. paths.basename(os.tmpname()) end
  local text = gmodule.fg:todot(prefix)
  for _, node in ipairs(gmodule.fg.nodes) do
    if node.data == failedNode.data then
      text = text:gsub('}%s*$', '') .. ('n%d[style=filled, fillcolor=red];\n}'):format(node.id)
    end
  end
  io.stderr:write(('saving %s.svg\n'):format(prefix))
  local ok, err = pcall(graph._writeDotAndSvg, text, prefix)
  if not ok then io.stderr:write(tostring(err) .. '\n') end
end

local function checkedEachNode(self, nodes, step, a, b)
  for k, node in ipairs(nodes) do
    local ok, err = xpcall(function() step(node, k, a, b) end, withTraceback)
    if not ok then
      drawFailure(self, node)
      error(err, 0)
    end
    if self.verbose then print(' V : ' .. node:label()) end
  end
end

-- With enable, an error inside a gModule's forward or backward saves its graph (see
-- drawFailure) before it propagates.
function nngraph.setDebug(enable)
  nn.gModule._eachNode = enable and checkedEachNode or eachNode
end

-- Names the nodes held in the local variables of the function `stackLevel` levels up (default
-- 1: the caller), after their variables; a name set before is kept.
function nngraph.annotateNodes(stackLevel)
  local level = (stackLevel or 1) + 1
  for i = 1, math.huge do
    local name, value = debug.getlocal(level, i)
    if not name then break end
    if torch.typename(value) == 'nngraph.Node' and not value.data.annotations.name then
      value:annotate({ name = name })
    end
  end
end

-- Draws the forward graph in a temporary svg and opens it in the desktop's viewer.
function nngraph.display(gmodule)
  local fname = os.tmpname()
  graph.dot(gmodule.fg, gmodule.name or 'gModule', fname)
  local opener = jit and jit.os == 'OSX' and 'open' or 'xdg-open'
  os.execute(opener .. " '" .. fname .. ".svg'")
  return fname .. '.svg'
end
