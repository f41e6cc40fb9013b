-- Agent task: "Find the shortest route between two services in the dependency graph."
-- args: --input {"edges": [["web", "api"], ["api", "auth"], ["api", "db"], ["auth", "db"], ["db", "backup"], ["web", "cdn"], ["cdn", "storage"], ["storage", "backup"]], "from": "web", "to": "backup"}
-- expect-value: {"hops":3,"path":"web -> api -> db -> backup","visited":7}
local graph = {}
for _, e in ipairs(edges) do
  graph[e[1]] = graph[e[1]] or {}
  table.insert(graph[e[1]], e[2])
end
for _, next_nodes in pairs(graph) do table.sort(next_nodes) end
local queue, prev, seen = {from}, {}, {[from] = true}
local visited = 0
while #queue > 0 do
  local node = table.remove(queue, 1)
  visited = visited + 1
  if node == to then break end
  for _, n in ipairs(graph[node] or {}) do
    if not seen[n] then
      seen[n] = true
      prev[n] = node
      queue[#queue + 1] = n
    end
  end
end
local path, node = {}, to
while node do
  table.insert(path, 1, node)
  node = prev[node]
end
return {path = table.concat(path, " -> "), hops = #path - 1, visited = visited}
