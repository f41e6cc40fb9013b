-- Agent task: "Maintain a todo list: insert, remove, reorder, and render it."
-- expect-value: {"count":3,"empty_concat":"","middle":"lunch,review PR","moved":[0,1,2,3],"numbers":"1|2.5|x","packed_n":3,"removed":["celebrate","write spec"],"todo":"1. coffee; 2. lunch; 3. review PR; 4. deploy","unpacked":[20,30,40]}
local todo = {"write spec", "review PR", "deploy"}
table.insert(todo, "celebrate")
table.insert(todo, 1, "coffee")
table.insert(todo, 3, "lunch")
local removed_last = table.remove(todo)
local removed_second = table.remove(todo, 2)
local rendered = {}
for i, item in ipairs(todo) do rendered[i] = i .. ". " .. item end
local a, b, c = table.unpack({10, 20, 30, 40}, 2, 4)
local copy = table.move({1, 2, 3}, 1, 3, 2, {0})
local packed = table.pack(nil, "x", nil)
return {
  todo = table.concat(rendered, "; "),
  removed = {removed_last, removed_second},
  middle = table.concat(todo, ",", 2, 3),
  unpacked = {a, b, c},
  moved = copy,
  packed_n = packed.n,
  count = select("#", table.unpack({1, 2, 3})),
  empty_concat = table.concat({}, ","),
  numbers = table.concat({1, 2.5, "x"}, "|"),
}
