-- An agent-style analysis step: filter, aggregate and format `records` (a global from the
-- inputs). Written without string.find/gsub/rep, table.concat/insert/sort and utf8.*, which
-- the sandbox does not offer in this version. bench_run times it; see docs/performance.md.
local function titlecase(s)
  return string.upper(string.sub(s, 1, 1)) .. string.lower(string.sub(s, 2))
end

local function checksum(s)
  local h = 0
  for i = 1, #s do h = (h * 31 + string.byte(s, i)) % 1000003 end
  return h
end

-- Group the active records by department, tracking each department's best-rated person.
local by_dept, active, total, squares = {}, {}, 0, 0
for _, r in ipairs(records) do
  if r.active then
    active[#active + 1] = r
    total, squares = total + r.salary, squares + r.salary * r.salary
    local d = by_dept[r.dept]
    if not d then
      d = { n = 0, sum = 0, best = r }
      by_dept[r.dept] = d
    end
    d.n, d.sum = d.n + 1, d.sum + r.salary
    if r.rating > d.best.rating then d.best = r end
  end
end

-- The k largest by key(r), by repeated selection (no table.sort here).
local function top(list, k, key)
  local picked, used = {}, {}
  for _ = 1, math.min(k, #list) do
    local best
    for i, r in ipairs(list) do
      if not used[i] and (best == nil or key(r) > key(list[best])) then best = i end
    end
    used[best], picked[#picked + 1] = true, list[best]
  end
  return picked
end

local departments = {}
for name, d in pairs(by_dept) do
  departments[name] = { headcount = d.n, mean_salary = math.floor(d.sum / d.n + 0.5),
                        star = titlecase(d.best.name) }
end

local board = ""
for i, r in ipairs(top(active, 5, function(r) return r.rating * 1000 - r.id end)) do
  board = board .. string.format("%d. %-8s %-5s %5.2f #%s\n", i, titlecase(r.name),
                                 string.upper(r.dept), r.rating, r.tags[1])
end

local n = #active
local mean = n > 0 and total / n or 0
return { count = n, mean_salary = mean, departments = departments, board = board,
         stddev = n > 0 and math.sqrt(math.max(squares / n - mean * mean, 0)) or 0,
         digest = checksum(board) }
