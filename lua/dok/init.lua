-- dok: torch7's documentation package, here the argument helpers that older packages use
-- (dok.unpack, dok.usage, dok.error are xlua's); the HTML help browser is not provided.
require 'xlua'

dok = rawget(_G, 'dok') or {}
dok.unpack = xlua.unpack
dok.usage = xlua.usage

-- Raises message, prefixed with '<domain> ' when given.
function dok.error(message, domain)
  if domain then message = '<' .. domain .. '> ' .. tostring(message) end
  error(message, 2)
end

function dok.help(symbol)
  print('dok.help: the documentation browser is not part of luabridge; see the package documentation (docs/ in a checkout)')
end

return dok
