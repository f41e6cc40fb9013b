-- Agent task: "Report contacts missing a phone number; the input has JSON nulls."
-- args: --input {"contacts": [{"name": "Ada", "phone": "555-0100", "tags": []}, {"name": "Bob", "phone": null, "tags": ["vip"]}, {"name": "Cy", "phone": null, "tags": []}], "meta": {"source": "crm", "cursor": null}}
-- expect-value: {"cursor_is_null":true,"cursor_type":"userdata","echo":{"cursor":null,"source":"crm"},"first_tags":[],"missing_phone":["Bob","Cy"],"tag_count":1}
local missing = {}
local tag_count = 0
for _, c in ipairs(contacts) do
  if c.phone == json.null then missing[#missing + 1] = c.name end
  tag_count = tag_count + #c.tags
end
return {
  missing_phone = missing,
  tag_count = tag_count,
  cursor_is_null = meta.cursor == json.null,
  cursor_type = type(meta.cursor),
  first_tags = contacts[1].tags,
  echo = meta,
}
