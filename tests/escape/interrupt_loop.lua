-- expect: interrupted
-- then: sandbox_poisoned
-- interrupt: 100ms
-- limits: instructions=0 time=5s
-- Attack: a loop with no instruction limit and a long deadline; only the host's interrupt from
-- another thread can stop it (THREATS D6).
while true do end
