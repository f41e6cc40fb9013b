-- expect: instruction_limit
-- limits: instructions=1e6 time=2s
-- Attack: a plain error whose xpcall handler loops: the handler is metered, so the limit trips
-- inside it; the next handler call for that limit error must not run unmetered (THREATS D6).
xpcall(function() error("plain") end, function(e) while true do end end)
print("ESCAPED: xpcall returned")
