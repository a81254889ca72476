// TemplateOptions: how a template is lexed and the resource limits applied
// while it renders. Plain record; copy freely.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

struct TemplateOptions {
  // Remove the first newline after a block tag or comment (Jinja trim_blocks).
  bool trim_blocks = false;
  // Strip spaces and tabs from the start of a line up to a block tag or
  // comment (Jinja lstrip_blocks).
  bool lstrip_blocks = false;
  // Keep a single trailing newline of the source (Jinja drops it by default).
  bool keep_trailing_newline = false;

  // Limits: exceeding one is an error Status, never a crash or a hang.
  size_t max_output_bytes = 16u << 20;         // rendered text and any built string
  int64_t max_loop_iterations = 1'000'000;     // all loop iterations of one render
  int max_call_depth = 64;                     // nested macro calls
  int max_nesting_depth = 128;                 // nested statements/expressions when parsing
  // Work of one render: bytes of the strings (and list slots) that
  // operators, filters, calls and literals build, summed over the render. A
  // loop that rebuilds a large string each turn stops here even though no
  // single value or the output passes its limit.
  int64_t max_work_bytes = int64_t{256} << 20;
};

}  // namespace tern
