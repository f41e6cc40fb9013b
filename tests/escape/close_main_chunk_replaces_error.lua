-- expect: runtime_error
-- error-contains: raised by __close
-- stdout-contains: second closed first
-- Issue 9, F.7: a __close handler of the failed main chunk that raises replaces the error, and
-- the handlers further out still run, as in stock lua5.4.
local outer <close> = setmetatable({}, {__close = function(_, e)
  print("second closed " .. (tostring(e):find("raised by __close") and "first" or "ESCAPED"))
end})
local inner <close> = setmetatable({}, {__close = function()
  error("raised by __close", 0)
end})
error("boom")
