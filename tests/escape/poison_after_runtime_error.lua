-- expect: runtime_error
-- runs: 2
-- then: ok
-- Attack: an ordinary error must not poison the sandbox (REPL sessions keep going), and the
-- error must not leave the sandbox in a tripped state (THREATS D6: classify from flags only).
run_count = (run_count or 0) + 1
if run_count == 2 then error("instruction limit exceeded (a fake limit message)") end
return run_count
