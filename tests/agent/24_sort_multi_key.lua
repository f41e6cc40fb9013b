-- Agent task: "Sort the employees by department, then salary (highest first), then name."
-- args: --input {"staff": [{"name": "Zoe", "dept": "eng", "salary": 120}, {"name": "Al", "dept": "ops", "salary": 90}, {"name": "Bea", "dept": "eng", "salary": 150}, {"name": "Cal", "dept": "eng", "salary": 120}, {"name": "Di", "dept": "ops", "salary": 95}, {"name": "Ed", "dept": "art", "salary": 70}]}
-- expect-value: {"desc":["pear","cherry","banana","Apple"],"nums":[-3,0,1,2,5,5,6,9],"staff":["art/Ed/70","eng/Bea/150","eng/Cal/120","eng/Zoe/120","ops/Di/95","ops/Al/90"]}
table.sort(staff, function(a, b)
  if a.dept ~= b.dept then return a.dept < b.dept end
  if a.salary ~= b.salary then return a.salary > b.salary end
  return a.name < b.name
end)
local lines = {}
for i, s in ipairs(staff) do
  lines[i] = string.format("%s/%s/%d", s.dept, s.name, s.salary)
end
local nums = {5, 2, 9, 1, 5, 6, -3, 0}
table.sort(nums)
local desc = {"pear", "Apple", "banana", "cherry"}
table.sort(desc, function(a, b) return a:lower() > b:lower() end)
return {staff = lines, nums = nums, desc = desc}
