-- Agent task: "Shuffle the participants reproducibly and draw three dice rolls."
-- args: --seed 42
-- expect-value: {"big":8550099830351437335,"f":0.022876301569947355,"order":["ada","cy","eve","dee","bob","fay"],"range_ok":true,"rolls":[2,1,3],"unit_float":true}
local people = {"ada", "bob", "cy", "dee", "eve", "fay"}
for i = #people, 2, -1 do
  local j = math.random(i)
  people[i], people[j] = people[j], people[i]
end
local rolls = {}
for i = 1, 3 do rolls[i] = math.random(1, 6) end
local f = math.random()
local big = math.random(0)
return {order = people, rolls = rolls, unit_float = f >= 0 and f < 1, f = f, big = big,
  range_ok = math.random(10, 20) >= 10}
