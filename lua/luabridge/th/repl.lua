-- The Lua side of `luabridge th`, after Torch7's trepl: a print that lays tables out, the
-- prompt's evaluation (results printed and kept in _RESULTS) and name completion through tables
-- and metatables. luabridge/th/repl.py reads lines and calls these.
local repl = {}

local plainPrint = print
local depthLimit = 5   -- nesting levels a printed table opens (setprintlevel)

local function torchKind(x)
   local name = torch and torch.typename(x)
   if not name then return nil end
   if name:find('^torch%..*Tensor$') then return 'tensor', name:sub(7) end
   if name:find('^torch%..*Storage$') then return 'storage', name:sub(7) end
end

-- 'DoubleTensor - size: 2x3', 'FloatStorage - size: 5', 'DoubleTensor - empty'
local function sizeText(x)
   local kind, name = torchKind(x)
   if kind == 'storage' then return name .. ' - size: ' .. x:size() end
   if x:nDimension() == 0 then return name .. ' - empty' end
   return name .. ' - size: ' .. table.concat(x:size():totable(), 'x')
end

-- A value inside a printed table: strings quoted, tensors and storages by their size.
local function fieldText(v)
   if type(v) == 'string' then return '"' .. v .. '"' end
   if (type(v) == 'userdata' or type(v) == 'cdata') and torchKind(v) then return sizeText(v) end
   return tostring(v)
end

local function writeTable(t, depth)
   local indent = string.rep(' ', depth * 4)
   if next(t) == nil then
      io.write(indent, '{}\n')
      return
   end
   io.write(indent, '{\n')
   for k, v in pairs(t) do
      io.write(indent, '  ', tostring(k), ' : ')
      if type(v) ~= 'table' then
         io.write(fieldText(v), '\n')
      elseif depth >= depthLimit - 1 or next(v) == nil then
         io.write('{...}\n')
      else
         io.write('\n')
         writeTable(v, depth + 1)
      end
   end
   io.write(indent, '}\n')
end

local function hasToString(t)
   local mt = getmetatable(t)
   return type(mt) == 'table' and mt.__tostring ~= nil
end

-- trepl's print: tables without a __tostring laid out over lines, a few levels deep; tensors and
-- other userdata on lines of their own; other values separated by tabs. (trepl also ends a line
-- with a tab and prints nothing for print(): here the line ends clean and print() is a newline.)
function repl.print(...)
   local n = select('#', ...)
   if n == 0 or depthLimit == 0 then
      plainPrint(...)
      return
   end
   for i = 1, n do
      local v = select(i, ...)
      if type(v) == 'table' and not hasToString(v) then
         writeTable(v, 0)
      elseif type(v) == 'table' or type(v) == 'userdata' or type(v) == 'cdata' then
         io.write(tostring(v), '\n')
      else
         io.write(tostring(v), i == n and '\n' or '\t')
      end
   end
   io.flush()
end

-- How deep print opens nested tables; 0 restores Lua's own print.
function repl.setprintlevel(n)
   if type(n) ~= 'number' or n < 0 then error('setprintlevel: expected a number >= 0', 2) end
   depthLimit = math.floor(n)
end

-- Runs a compiled prompt chunk; with `show`, prints what it returned and keeps the first value in
-- _RESULTS (the last one also in _LAST).
local function pack(...) return { n = select('#', ...), ... } end

function repl.run(chunk, show)
   local results = pack(chunk())
   if show and results.n > 0 then
      print(unpack(results, 1, results.n))
      _RESULTS[#_RESULTS + 1] = results[1]
      _LAST = results[1]
   end
end

-- Completion ------------------------------------------------------------------------------------

local keywords = { 'and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function', 'if',
                   'in', 'local', 'nil', 'not', 'or', 'repeat', 'return', 'then', 'true', 'until',
                   'while' }
local maxChain = 20   -- metatables followed, against loops

-- Where a value's missing fields come from (its metatable's __index table, or the metatable
-- itself): the walk dir() of a proxy makes too.
local fieldSource = require('luabridge.core.proxy').fieldSource

-- A field read without running metamethods.
local function peek(x, name)
   for _ = 1, maxChain do
      if type(x) == 'table' then
         local v = rawget(x, name)
         if v ~= nil then return v end
      end
      local source = fieldSource(x)
      if source == nil or source == x then return nil end
      x = source
   end
end

local function suffix(v)
   local kind = type(v)
   if kind == 'table' then return '.' end
   if kind == 'function' then return '(' end
   if kind == 'userdata' and getmetatable(v) ~= nil then return ':' end
   return ' '
end

-- Completions of `text` (a name, maybe a path such as 'torch.Ten' or 't:si'), each the whole new
-- text with a suffix hinting at what follows. Names starting with '_' only when asked for.
function repl.complete(text)
   local head, last = text:match('^(.*[.:])([%w_]*)$')
   local object = _G
   if head then
      for name in head:gmatch('([^.:]+)[.:]') do
         object = peek(object, name)
         if object == nil then return {} end
      end
   else
      head, last = '', text
   end
   local found, seen = {}, {}
   local function add(name, v)
      if not seen[name] and name:sub(1, #last) == last and name:find('^[%a_][%w_]*$')
         and (name:sub(1, 1) ~= '_' or last:sub(1, 1) == '_') then
         seen[name] = true
         found[#found + 1] = head .. name .. suffix(v)
      end
   end
   if head == '' then
      for _, word in ipairs(keywords) do add(word, nil) end
   end
   local source, visited = object, {}
   for _ = 1, maxChain do
      if type(source) == 'table' then
         if visited[source] then break end
         visited[source] = true
         for name, v in pairs(source) do
            if type(name) == 'string' then add(name, v) end
         end
      end
      source = fieldSource(source)
      if source == nil then break end
   end
   table.sort(found)
   return found
end

return repl
