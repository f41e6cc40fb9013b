-- Agent task: "Print a boxed text report of the build results."
-- args: --input {"builds": [{"target": "linux-x64", "ok": true, "secs": 312}, {"target": "macos-arm", "ok": false, "secs": 95}, {"target": "win", "ok": true, "secs": 540}]}
-- expect-stdout: +------------------------------+\n| target                result |\n+==============================+\n| linux-x64           ok 5m12s |\n| macos-arm         FAIL 1m35s |\n| win                 ok 9m00s |\n+------------------------------+\nab,ab,ab\n
-- expect-value: {"empty":"","failed":1,"sep_only":"--"}
local width = 32
local function row(a, b) return "| " .. a .. string.rep(" ", width - 4 - #a - #b) .. b .. " |" end
print("+" .. string.rep("-", width - 2) .. "+")
print(row("target", "result"))
print("+" .. string.rep("=", width - 2) .. "+")
local failed = 0
for _, b in ipairs(builds) do
  local secs = string.format("%dm%02ds", b.secs // 60, b.secs % 60)
  print(row(b.target, (b.ok and "ok " or "FAIL ") .. secs))
  if not b.ok then failed = failed + 1 end
end
print("+" .. string.rep("-", width - 2) .. "+")
io.write(string.rep("ab", 3, ","), "\n")
return {failed = failed, empty = string.rep("x", 0), sep_only = string.rep("", 3, "-")}
