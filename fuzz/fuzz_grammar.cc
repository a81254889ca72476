// libFuzzer target: the structured-output compilers. The first byte picks
// one: a JSON schema (the rest parsed as JSON), a GBNF grammar, or a regular
// expression; each compiles or is refused with a message.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      (void)tern::grammar::CompileJsonSchema(schema);
      break;
    }
    case 1:
      (void)tern::grammar::CompileGbnf(text);
      break;
    default: {
      tern::grammar::Grammar g;
      (void)tern::grammar::AddRegexRule(text, tern::grammar::RegexTarget{}, &g);
      break;
    }
  }
  return 0;
}
