-- expect: ok
-- mounts: /data=tree:overlay
-- Attack: open the FIFO and the listening socket planted in an overlay mount for reading,
-- writing and appending (a copy-up would read them), and rename them. Each is refused with
-- EACCES (13) without being opened: the run does not block on the FIFO and never connects.
for _, name in ipairs({"fifo", "sock"}) do
  for _, mode in ipairs({"r", "w", "a", "r+", "w+"}) do
    local f, msg, errno = io.open("/data/" .. name, mode)
    assert(f == nil and errno == 13, name .. " " .. mode .. ": " .. tostring(msg))
  end
  local ok, msg, errno = os.rename("/data/" .. name, "/data/moved")
  assert(not ok and errno == 13, tostring(msg))
end
print("special files refused")
