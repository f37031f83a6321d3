-- The global `torch` table, shared by every file of the library.
local torch = rawget(_G, 'torch')
if torch == nil then
  torch = {}
  rawset(_G, 'torch', torch)
end
return torch
