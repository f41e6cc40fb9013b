-- expect: ok
-- accept: runtime_error
-- Attack: os.exit calls the C exit() of the host process (THREATS E1); the driver's process
-- must survive the run and report normally.
if os and os.exit then
  pcall(os.exit, 0, true)
  pcall(os.exit, 3)
end
