-- Attack: a program started by proc.run fills an rw mount past the view's quotas (issue 25, 1):
-- the view charges what passes through it, and a bound rw mount let the program write 40 MiB
-- and 1,200 files under a 16 MiB / 1,000-file quota straight onto the host.
-- expect: ok
-- limits: fs-bytes=16M fs-files=1000
-- mounts: /work=work:rw
-- exec: /bin/sh
local r = assert(proc.run{'sh', '-c', [[
  i=0; while [ $i -lt 40 ]; do head -c 1048576 /dev/zero >/work/big$i 2>/dev/null || break; i=$((i+1)); done
  mkdir /work/many; i=0; while [ $i -lt 1200 ]; do : >/work/many/f$i; i=$((i+1)); done
  echo done]]})
assert(r.stdout == 'done\n', 'the program did not run to its end: ' .. r.stdout .. r.stderr)
if r.changes ~= 0 or not r.changes_error then
  error('ESCAPED: ' .. r.changes .. ' entries of the program reached the rw mount past the quota')
end
assert(tostring(r.changes_error):find('quotas allow 1000', 1, true), tostring(r.changes_error))
-- The host directory, as the view reads it: what the fixture put there, nothing more.
if io.open('/work/big0') or io.open('/work/many/f0') then
  error('ESCAPED: a file the program wrote past the quota is on the host')
end
assert(io.open('/work/keep.txt'):read('a') == 'keep\n')
return 'refused: ' .. r.changes_error
