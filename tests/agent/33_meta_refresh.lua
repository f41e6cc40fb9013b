-- Agent task: the documented fix for late metamethods: call setmetatable again. Methods added
-- to the live __index table later are seen without it.
-- expect-value: {"a":"$1.50","b":"$2.75","total":"$4.25"}
local Money = {}
Money.__index = Money
local function money(c) return setmetatable({cents = c}, Money) end
local a, b = money(150), money(275)
function Money:fmt() return string.format("$%d.%02d", self.cents // 100, self.cents % 100) end
Money.__add = function(x, y) return money(x.cents + y.cents) end
setmetatable(a, Money)
local total = a + b
return {total = total:fmt(), a = a:fmt(), b = b:fmt()}
