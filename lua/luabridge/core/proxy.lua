-- The Lua half of luabridge/core/proxy.py: the names a Lua object answers to (its own fields and
-- those its metatables' __index lend it, as torch classes keep their methods in the metatable), for
-- dir() of a proxy, so that IPython and editors complete them. th's Tab completion walks the same
-- chain (lua/luabridge/th/repl.lua).
local proxy = {}

local maxChain = 20   -- metatables followed, against loops

-- Where a value's missing fields come from: its metatable's __index table, or the metatable
-- itself when __index is a function (torch classes keep their methods in the metatable).
function proxy.fieldSource(x)
   local mt = getmetatable(x)
   if type(mt) ~= 'table' then return nil end
   local index = rawget(mt, '__index')
   if type(index) == 'table' then return index end
   if index ~= nil then return mt end
end

-- The object itself (when a table), then each table its fields come from, at most maxChain.
function proxy.sources(x)
   local out, visited, source = {}, {}, x
   for _ = 1, maxChain do
      if type(source) == 'table' then
         if visited[source] then break end
         visited[source] = true
         out[#out + 1] = source
      end
      source = proxy.fieldSource(source)
      if source == nil then break end
   end
   return out
end

-- The identifier-like string keys of x and of the tables it inherits from, sorted, each once;
-- metamethods ('__index', ...) left out.
function proxy.names(x)
   local seen, found = {}, {}
   for _, source in ipairs(proxy.sources(x)) do
      for name in pairs(source) do
         if type(name) == 'string' and not seen[name] and name:find('^[%a_][%w_]*$') and not name:find('^__') then
            seen[name] = true
            found[#found + 1] = name
         end
      end
   end
   table.sort(found)
   return found
end

return proxy
