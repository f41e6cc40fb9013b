-- Agent task: a model defines __add after creating the object (stock Lua allows this).
-- moonbox freezes metatables at setmetatable (docs/compat.md "Metatables are frozen when set").
-- stock: skip (documented difference: stock Lua sees the late __add)
-- expect-status: runtime_error
-- expect-error: attempt to perform arithmetic on a table value
local Money = {}
Money.__index = Money
local function money(c) return setmetatable({cents = c}, Money) end
local a, b = money(150), money(275)
Money.__add = function(x, y) return money(x.cents + y.cents) end
local total = a + b
return total.cents
