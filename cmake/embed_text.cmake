# cmake -DIN=FILE -DOUT=FILE.cc -DNAME=Function -P embed_text.cmake
# Writes a C++ file whose function NAME() returns FILE's text (a raw string
# literal, split in pieces below the compilers' literal limits).
file(READ "${IN}" content)
string(FIND "${content}" ")tern_embed\"" bad)
if(NOT bad EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )tern_embed\"")
endif()
string(LENGTH "${content}" len)
set(pieces "")
set(pos 0)
while(pos LESS len)
  string(SUBSTRING "${content}" ${pos} 8000 piece)
  string(APPEND pieces "R\"tern_embed(${piece})tern_embed\"\n")
  math(EXPR pos "${pos} + 8000")
endwhile()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#include <string_view>\nnamespace tern {\nstd::string_view ${NAME}() {\n  static const char kText[] =\n${pieces};\n  return std::string_view(kText, sizeof(kText) - 1);\n}\n}  // namespace tern\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
