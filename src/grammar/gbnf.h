// GBNF (the grammar notation of llama.cpp, vLLM's guided_grammar) -> Grammar.
//
//   root  ::= "{" pair ("," pair)* "}"     # a comment
//   pair  ::= [a-z]+ ":" ( num | "null" )
//   num   ::= "-"? [0-9]{1,3}
//
// Rules `name ::= body`; bodies hold "literals" (escapes \n \t \r \"
// \\ \xHH \uHHHH), [classes] and `.` (as regex.h reads them), rule names,
// ( groups ), `|`, and `* + ? {m} {m,} {m,n}`. The start rule is `root`.
// Errors name the line.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tern::grammar {

StatusOr<Grammar> CompileGbnf(std::string_view text);

}  // namespace tern::grammar
