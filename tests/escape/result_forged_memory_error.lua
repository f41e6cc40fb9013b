-- expect: runtime_error
-- limits: memory=64M instructions=1e8 time=3s
-- error-contains: not enough memory
-- then: runtime_error
-- Attack: Lua's lua_error turns the string "not enough memory" (its preregistered memory
-- message) into LUA_ERRMEM, so error("not enough memory", 0) was reported as memory_limit
-- and poisoned the sandbox (issue 9, E.1). The status comes from the heap, which refused
-- no block here, so this is a runtime error and the sandbox stays usable. Through a
-- coroutine first.
local co = coroutine.create(function() error("not enough memory", 0) end)
local ok, err = coroutine.resume(co)
assert(not ok and err == "not enough memory")
error("not enough memory", 0)
