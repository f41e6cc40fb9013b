-- expect: time_limit
-- accept: memory_limit
-- limits: time=100ms
-- Attack: a multi-MiB os.date format runs one strftime per specifier in C, where the hook
-- never fires (THREATS 0.2): it must be charged as it goes and stop at the deadline.
local f = "%c"
for i = 1, 22 do f = f .. f end
for i = 1, 100 do pcall(os.date, f, 0) end
print("ESCAPED: formatted past the deadline")
