-- Agent task: a model adds a finalizer to close a resource; moonbox accepts it and never runs
-- it (finalizers would run with the budget off): stock Lua would finalize the dropped one.
-- stock: skip (documented difference: __gc never runs)
-- expect-value: ["conn",0]
local finalized = 0
local Handle = {__gc = function(h) finalized = finalized + 1 end}
Handle.__index = Handle
local h = setmetatable({name = "conn"}, Handle)
local other = setmetatable({name = "tmp"}, Handle)
other = nil
collectgarbage()
return {h.name, finalized}
