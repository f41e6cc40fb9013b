-- expect: output_limit
-- Attack: a result made of many ways back to an enclosing table, each named by a long path
-- ({"$cycle": "value.next.next...."}): every form is charged as it is written and counts
-- against the result limit, which ends the run before the text grows past it.
local t = {}
local deep = t
for i = 1, 100 do
  deep.next = {}
  deep = deep.next
end
for i = 1, 100000 do deep[i] = t end
return t
