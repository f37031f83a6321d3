-- torch.json: the dkjson API torchx bundles (encode, decode, null), over our cjson. decode(str
-- [, pos, nullval]) gives JSON null as nullval (default nil), returns the value and the position
-- after it, or nil, pos and the message; encode's dkjson state options (indent...) are ignored.
local cjson = require 'cjson'

local json = { version = 'dkjson 2.5', null = cjson.null }

local function replaceNull(value, nullval)
  if value == cjson.null then return nullval end
  if type(value) == 'table' then
    for k, v in pairs(value) do value[k] = replaceNull(v, nullval) end
  end
  return value
end

function json.encode(value)
  return cjson.encode(value)
end

function json.decode(str, pos, nullval)
  pos = pos or 1
  local ok, value = pcall(cjson.decode, str:sub(pos))
  if not ok then return nil, pos, value end
  return replaceNull(value, nullval), #str + 1
end

torch.json = json
return json
