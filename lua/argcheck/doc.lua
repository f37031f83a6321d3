-- argcheck.doc: doc(markdown) keeps documentation text while recording (doc.record() ...
-- doc.stop() returns what was kept); otherwise it is dropped.
local doc = {}

function doc.record() doc.__record = {} end

function doc.stop()
  local text = table.concat(doc.__record or {})
  doc.__record = nil
  return text
end

function doc.doc(text)
  if doc.__record then doc.__record[#doc.__record + 1] = text end
end

return setmetatable(doc, { __call = function(self, ...) return self.doc(...) end })
