-- torch7's nn: modules, containers, criterions. One class per file; classes/<group>.lua lists
-- each group's class names in load order (parents first).
require 'torch'
nn = rawget(_G, 'nn') or {}

for _, group in ipairs { 'framework', 'layers', 'convolution', 'tables', 'criterions' } do
  for _, name in ipairs(require('nn.classes.' .. group)) do require('nn.' .. name) end
end
require 'nn.StochasticGradient'   -- a trainer, not a module: in no class list
require 'nn.util.legacy'
nn.plans = require 'nn.util.plans'
-- torch/nn's init requires its THNN table first thing: custom layers call input.THNN.<op> directly
-- (nn.THNN requires 'nn' itself: when it is the one loading nn, it is in package.loaded already)
package.loaded.nn = nn
if not package.loaded['nn.THNN'] then require 'nn.THNN' end
return nn
