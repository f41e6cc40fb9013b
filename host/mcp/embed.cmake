# host/mcp/embed.cmake -- compiles a text file into a C string: cmake -DIN=file -DOUT=file.c
# -DNAME=symbol -P host/mcp/embed.cmake. docs/result.schema.json is written once, in docs/, and
# the MCP server's outputSchema is that file (no copy to drift from it).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by host/mcp/embed.cmake: do not edit. */\nextern const char ${NAME}[];\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
