-- The elementwise minimum of a table of tensors.
local tables = require 'nn.util.tables'
local CMinTable, parent = torch.class('nn.CMinTable', 'nn.Module')

function CMinTable:__init()
  parent.__init(self)
  self.gradInput = {}
  self.minIdx = torch.Tensor()
end

tables.extremum(CMinTable, '<', 'minIdx')
