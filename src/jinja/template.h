// Template: a parsed Jinja2-subset template (the dialect of the chat
// templates that GGUF files carry in `tokenizer.chat_template`).
//
//   TERN_ASSIGN_OR_RETURN(Template t, Template::Parse(source));
//   TERN_ASSIGN_OR_RETURN(std::string text, t.Render(Value::Dict({{"x", 1}})));
//
// Supported: {{ }}, {% %}, {# #}, whitespace control (-, +, trim_blocks,
// lstrip_blocks), if/elif/else, for (else, loop.*, unpacking, `if` filter,
// break/continue), set (incl. namespace attributes and set blocks), macro,
// filter blocks, raw, the usual operators, filters, tests and string/list/dict
// methods (builtins.h). Not supported: include/extends/block/import, call
// blocks, `recursive` loops, `%` string formatting, autoescaping.
// Known differences from Jinja2: undefined variables render as "" and are
// falsy, and attribute/item access on them gives undefined instead of an
// error; tuples are lists (they print with [ ]); upper/lower/title map ASCII
// letters only; `loop` is one object per for statement, updated in place.
//
// Errors (parse and render) are Status values whose message starts with
// "template line L, column C:". Rendering enforces TemplateOptions limits
// (output size, loop iterations, macro depth), so no input crashes or hangs.
//
// Thread rules: a Template is immutable after Parse; Render may be called
// from several threads at once. Copies share the parsed tree.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "jinja/ast.h"
#include "jinja/template_options.h"
#include "jinja/value.h"

namespace tern {

class Template {
 public:
  static StatusOr<Template> Parse(std::string_view source, TemplateOptions options = {});

  // `context` is a dict of variables (or undefined for none). The template
  // works on a private copy, so the caller's values are never modified.
  StatusOr<std::string> Render(const Value& context) const;

  const TemplateOptions& options() const { return options_; }

 private:
  Template(std::shared_ptr<const StmtList> body, TemplateOptions options)
      : body_(std::move(body)), options_(options) {}

  std::shared_ptr<const StmtList> body_;
  TemplateOptions options_;
};

}  // namespace tern
