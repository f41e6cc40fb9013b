-- expect: runtime_error
-- error-contains: os.exit(3)
-- stdout-contains: before
-- stdout-not-contains: after
-- Attack: keep running after os.exit by catching it (pcall, xpcall, a coroutine, a __close
-- handler that loops) — the exit must end the run, never the host, and never be swallowed.
print("before")
local co = coroutine.wrap(function() pcall(os.exit, 3) return "ESCAPED: resumed after exit" end)
local ok, r = pcall(co)
if ok then print(r) end
xpcall(os.exit, function() print("ESCAPED: handler ran after exit") end, 3)
do
  local guard <close> = setmetatable({}, {__close = function() while true do end end})
  pcall(os.exit, 3)
end
print("after")
print("ESCAPED: the script kept running after os.exit")
