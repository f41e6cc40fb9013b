-- expect: runtime_error
-- Attack: yield from the main chunk, hoping the host's lua_resume hands control back (THREATS D13).
coroutine.yield("out")
print("ESCAPED: the chunk was resumed after a top-level yield")
