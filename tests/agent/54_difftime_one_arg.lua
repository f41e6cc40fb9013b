-- Agent task: "How many whole days old is the account?" The model calls os.difftime with one
-- argument (a Lua 5.3 habit); Lua 5.4's os.difftime requires both (lua 5.4.4 loslib.c:
-- l_checktime(L, 2)), so stock raises and the script should fail the same way in moonbox.
-- args: --time 1700000000 --input {"created": 1690000000}
-- expect-status: runtime_error
-- expect-error: bad argument #2 to 'difftime' (number expected, got no value)
local age_seconds = os.difftime(os.time()) - os.difftime(created)
return math.floor(age_seconds / 86400)
