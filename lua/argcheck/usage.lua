-- The usage text argcheck shows when no rule set matches:
--   arguments:
--   {
--      [x   = number]  -- the age of the captain [default=0]
--       msg = string   -- a message
--   }
return function(spec)
  local width, tw = 0, 0
  for _, rule in ipairs(spec.rules) do
    width = math.max(width, #rule.name)
    tw = math.max(tw, #(rule.type or 'any'))
  end
  local lines = {}
  if spec.help then lines[#lines + 1] = (spec.help:gsub('\n+$', '')) end
  lines[#lines + 1] = 'arguments:'
  lines[#lines + 1] = '{'
  for _, rule in ipairs(spec.rules) do
    local optional = rule.opt or rule.default ~= nil or rule.defaulta or rule.defaultf
    local body = ('%s%s = %s%s'):format(rule.name, string.rep(' ', width - #rule.name), rule.type or 'any',
      string.rep(' ', tw - #(rule.type or 'any')))
    local line = optional and ('  [' .. body .. ']') or ('   ' .. body .. ' ')
    local note = rule.help or rule.doc or ''
    if rule.default ~= nil then note = note .. (' [default=%s]'):format(tostring(rule.default))
    elseif rule.defaulta then note = note .. (' [default=%s]'):format(rule.defaulta)
    elseif rule.opt then note = note .. ' [optional]' end
    lines[#lines + 1] = line .. '  -- ' .. note
  end
  lines[#lines + 1] = '}'
  return table.concat(lines, '\n')
end
