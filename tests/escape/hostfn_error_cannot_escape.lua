-- expect: runtime_error
-- host-functions: on
-- error-contains: host says no
-- Attack: host errors are plain catchable errors; an uncaught one ends the run as a runtime
-- error with exactly the host's message, without poisoning or confusing the result.
local ok, e = pcall(host.fail, "x")
assert(not ok and e == "host says no", tostring(e))
host.fail()
