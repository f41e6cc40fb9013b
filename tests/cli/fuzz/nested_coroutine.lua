-- The bug of nested.lua inside a coroutine, after a 16 KiB string (the hook is re-armed at a
-- shorter interval while it lives): coverage must survive both.
local function check(data)
  local big = string.rep("x", 16 << 10)
  local b = {data:byte(1, 6)}
  if b[1] == 0x6d then
    if b[2] == 0x6f then
      if b[3] == 0x6f then
        if b[4] == 0x6e then
          if b[5] == 0x21 then
            if b[6] == 0x3f then
              error("the bug behind six comparisons, in a coroutine")
            end
          end
        end
      end
    end
  end
  return #big
end

function fuzz(data)
  local co = coroutine.wrap(check)
  co(data)
end
