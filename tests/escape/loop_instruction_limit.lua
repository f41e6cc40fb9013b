-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: an empty infinite loop must stop on the instruction budget (THREATS 8.5, D6).
while true do end
print("ESCAPED: the loop ended")
