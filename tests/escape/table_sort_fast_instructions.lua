-- expect: instruction_limit
-- limits: memory=64M instructions=2e6 time=20s
-- Attack: table.sort of a plain array of integers runs on a C array of keys (stdlib/table.c,
-- sort_fast), where no VM instruction runs and the count hook never fires. Building the
-- array costs about 1.2 million instructions; sorting 200,000 integers makes some 3.5 million
-- comparisons. Unless the fast path charges its reads and comparisons, the sort finishes
-- under the limit and the script escapes.
local t = {}
local x = 1
for i = 1, 200000 do
  x = x * 1103515245 % 2147483648
  t[i] = x
end
pcall(table.sort, t)
print("ESCAPED: a 200,000-integer sort was not charged")
