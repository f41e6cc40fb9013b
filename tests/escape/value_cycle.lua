-- expect: ok
-- stdout-contains: done
-- Attack: a returned table that contains itself: an encoder without cycle detection never ends
-- (THREATS section 4). Each way back to an enclosing table is written as {"$cycle": path} and
-- the walk stops there.
local t = {}
t[1] = t
t.self = {t}
local deep = t
for i = 1, 100 do
  deep.next = {up = deep}
  deep = deep.next
end
deep[1] = t
print("done")
return t
