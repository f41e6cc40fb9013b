-- expect: time_limit
-- accept: instruction_limit
-- limits: instructions=0 time=100ms
-- Attack: table.move over 2^63 - 1 indices of an empty table loops in C with no memory growth
-- and no VM instruction, so the count hook never fires (THREATS 0.2, D4).
table.move({}, 1, math.maxinteger, 1)
print("ESCAPED: table.move returned")
