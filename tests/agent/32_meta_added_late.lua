-- Agent task: a model defines __add after creating the objects (stock Lua allows this; moonbox
-- reads an event the metatable lacked at setmetatable live: docs/compat.md, "Metatables").
-- expect-value: 425
local Money = {}
Money.__index = Money
local function money(c) return setmetatable({cents = c}, Money) end
local a, b = money(150), money(275)
Money.__add = function(x, y) return money(x.cents + y.cents) end
local total = a + b
return total.cents
