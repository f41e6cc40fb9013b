-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: the xpcall message handler runs after the limit error and loops forever (THREATS D6).
xpcall(function() while true do end end, function(e) while true do end end)
print("ESCAPED: xpcall returned after the limit")
