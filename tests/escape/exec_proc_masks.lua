-- Attack: read the host's kernel command line (it may carry secrets) and boot id (a stable
-- host identifier) from inside the exec sandbox (issue 25, 8): generated files are bound over
-- both, and the boot id is each run's own.
-- expect: ok
-- exec: /bin/sh
local function look()
  local r = assert(proc.run{'sh', '-c', 'cat /proc/cmdline; cat /proc/sys/kernel/random/boot_id'})
  assert(r.code == 0, r.stderr)
  return r.stdout:match('^(.-)\n(.-)\n$')
end
local cmdline, boot1 = look()
local _, boot2 = look()
if cmdline ~= 'moonbox' then error('ESCAPED: the host kernel command line: ' .. tostring(cmdline)) end
assert(boot1 and boot1:match('^%x+%-%x+%-4%x+%-[89ab]%x+%-%x+$'), 'boot id form: ' .. tostring(boot1))
if boot1 == boot2 then error('ESCAPED: two runs saw one boot id (the host\'s): ' .. boot1) end
return {cmdline, boot1 ~= boot2}
