-- expect: time_limit
-- limits: instructions=0 time=300ms
-- Attack: the tightest loop Lua compiles (one backward jump) under the deadline (THREATS 8.14).
repeat until false
print("ESCAPED: the loop ended")
