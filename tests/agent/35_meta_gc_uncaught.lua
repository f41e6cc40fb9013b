-- Agent task: a model adds a finalizer to close a resource; moonbox refuses it.
-- stock: skip (documented difference: __gc is refused)
-- expect-status: runtime_error
-- expect-error: setmetatable: metatables with '__gc' are not allowed in this sandbox
local Handle = {__gc = function(h) h.closed = true end}
Handle.__index = Handle
local h = setmetatable({name = "conn"}, Handle)
return h.name
