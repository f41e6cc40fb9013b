-- expect: ok
-- Attack: read the host's environment through os.getenv (THREATS E1): HOME, PATH, the
-- variables ctest and the shell set, and names with odd bytes. The default policy defines no
-- variable, so every lookup must give nil.
local names = {"HOME", "PATH", "USER", "PWD", "SHELL", "LANG", "TERM", "LD_PRELOAD",
               "LD_LIBRARY_PATH", "HOSTNAME", "TMPDIR", "CTEST_INTERACTIVE_DEBUG_MODE",
               "CMAKE_CONFIG_TYPE", "ESCAPE_WALL_SLACK_MS", "home", "PATH\0", "", "=", "HOME="}
for _, name in ipairs(names) do
  local v = os.getenv(name)
  if v ~= nil then print("ESCAPED: os.getenv(" .. name .. ") = " .. tostring(v)) end
end
-- The same function reached another way is still the virtual one.
local os2 = require("os")
if os2.getenv("HOME") ~= nil or os2.getenv("PATH") ~= nil then
  print("ESCAPED: require('os').getenv leaked the host environment")
end
