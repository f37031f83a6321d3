-- nngraph.nesting: torch7 nngraph's helpers over a tensor or a nested table of tensors (totem and
-- other test helpers require them), under their nngraph names; the work is nn.utils'.
local nesting = {}

-- A copy with the same nesting and fresh tensors.
function nesting.cloneNested(obj) return (nn.utils.recursiveCopy(nil, obj)) end

function nesting.fillNested(obj, value) nn.utils.recursiveFill(obj, value) end

-- Resizes output (in place: its tables are kept) to input's nesting and sizes; keys that input
-- lacks are dropped.
function nesting.resizeNestedAs(output, input) nn.utils.recursiveResizeAs(output, input) end

function nesting.copyNested(output, input) nn.utils.recursiveCopy(output, input) end

-- output += input, element by element.
function nesting.addNestedTo(output, input) nn.utils.recursiveAdd(output, input) end

return nesting
