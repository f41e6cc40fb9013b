-- expect: ok
-- host-functions: on
-- limits: time=20s
-- (the time limit is generous: this test is about the argument cap, not time; a loaded machine
-- needs more than the default 2 s for the 3 MiB and 200,000-element copies)
-- Attack: feed a host function arguments far past the cap, hoping the host copies them.
local big = string.rep("x", 3 * 1024 * 1024)
local ok, e = pcall(host.echo, big)
assert(not ok and e:find("the most a host call takes", 1, true), tostring(e))
local many = {}
for i = 1, 200000 do many[i] = i end
ok, e = pcall(host.echo, many)
assert(not ok and e:find("the most a host call takes", 1, true), tostring(e))
ok, e = pcall(host.echo, table.unpack(many, 1, 200000))
assert(not ok, "a huge argument list crossed")
return host.echo("still works")[1]
