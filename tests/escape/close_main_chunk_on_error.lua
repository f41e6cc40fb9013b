-- expect: runtime_error
-- error-contains: boom
-- stdout-contains: closed t after: 
-- stdout-contains: boom
-- Issue 9, F.7: a to-be-closed variable of the main chunk is closed when the chunk fails, with
-- the error, as stock lua5.4 does (the run thread used to be left unclosed).
local t <close> = setmetatable({}, {__close = function(_, e)
  io.write("closed t after: ", tostring(e), "\n")
end})
error("boom")
