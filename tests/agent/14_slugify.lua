-- Agent task: "Turn these article titles into URL slugs, unique within the list."
-- args: --input {"titles": ["Hello, World!", "  Lua 5.4: What's New?  ", "hello world", "100% Pure -- Lua", "C++ & Rust"]}
-- expect-value: ["hello-world","lua-5-4-what-s-new","hello-world-2","100-pure-lua","c-rust"]
local used, slugs = {}, {}
for _, title in ipairs(titles) do
  local slug = title:lower():gsub("[^%w]+", "-"):gsub("^%-+", ""):gsub("%-+$", "")
  local base, n = slug, 1
  while used[slug] do
    n = n + 1
    slug = base .. "-" .. n
  end
  used[slug] = true
  slugs[#slugs + 1] = slug
end
return slugs
