-- expect: instruction_limit
-- runs: 2
-- then: sandbox_poisoned
-- limits: instructions=1e6
-- Attack: keep using a REPL sandbox after a limit tripped, hoping its state carries a half-run
-- (THREATS E8, D6). Run 1 is ok; run 2 loops; any further run must be refused.
if not seen_first_run then
  seen_first_run = true
  return "first"
end
while true do end
