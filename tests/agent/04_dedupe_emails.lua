-- Agent task: "Normalise and de-duplicate the email list, keeping first occurrences."
-- args: --input {"emails": ["  Ada@Example.com", "bob@example.com ", "ADA@example.COM", "carol@example.org", "bob@Example.com", "not-an-email", "dan@example.net"]}
-- expect-value: {"duplicates":2,"invalid":["not-an-email"],"unique":["ada@example.com","bob@example.com","carol@example.org","dan@example.net"]}
local seen, unique, invalid = {}, {}, {}
for _, raw in ipairs(emails) do
  local email = raw:match("^%s*(.-)%s*$"):lower()
  if not email:match("^[%w._%-]+@[%w.-]+%.%a+$") then
    invalid[#invalid + 1] = email
  elseif not seen[email] then
    seen[email] = true
    unique[#unique + 1] = email
  end
end
return {unique = unique, invalid = invalid, duplicates = #emails - #unique - #invalid}
