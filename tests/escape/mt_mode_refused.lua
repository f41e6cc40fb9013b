-- expect: runtime_error
-- error-contains: __mode
-- Attack: weak tables plus an emergency GC reach the luaV_finishset use-after-free (THREATS 0.1, 983bc433).
setmetatable({}, {__mode = "v"})
print("ESCAPED: setmetatable accepted __mode")
