// Renderer: executes a parsed template (ast.h) against a context and returns
// the text. One Renderer per render call (it holds the counters for the
// limits in TemplateOptions); the AST is only read.
//
// Scopes follow Jinja: builtin globals < context < template-level variables;
// each for-loop iteration and each macro call gets its own scope, so `set`
// inside a loop does not leak out (use namespace() for that); `if` has no
// scope of its own. Undefined names evaluate to undefined (empty, falsy).
// The first error is prefixed with the template line and column.
#pragma once

#include <string>

#include "base/status.h"
#include "jinja/ast.h"
#include "jinja/template_options.h"
#include "jinja/value.h"

namespace tern {

class Renderer {
 public:
  explicit Renderer(const TemplateOptions& options) : options_(options) {}

  StatusOr<std::string> Render(const StmtList& body, const Value& context);

 private:
  struct Frame {
    ValueDict vars;
    Frame* parent = nullptr;
  };
  enum class Flow { kNormal, kBreak, kContinue };

  Status ExecList(const StmtList& body, Frame* frame, std::string* out, Flow* flow);
  Status Exec(const Stmt& stmt, Frame* frame, std::string* out, Flow* flow);
  Status ExecFor(const Stmt& stmt, Frame* frame, std::string* out);
  Status ExecSet(const Stmt& stmt, Frame* frame);
  Status DefineMacro(const Stmt& stmt, Frame* frame);
  StatusOr<Value> CallMacro(const Stmt& stmt, const CallArgs& args);

  StatusOr<Value> Eval(const Expr& expr, Frame* frame);
  StatusOr<Value> EvalInner(const Expr& expr, Frame* frame);
  StatusOr<Value> EvalCall(const Expr& expr, Frame* frame);
  StatusOr<Value> EvalBinary(const Expr& expr, Frame* frame);
  StatusOr<Value> EvalCompare(const Expr& expr, Frame* frame);
  StatusOr<CallArgs> EvalArgs(const Expr& expr, size_t first_arg, Frame* frame);

  static const Value* Lookup(const Frame* frame, const std::string& name);
  static void Assign(Frame* frame, const std::string& name, Value value);
  Status Bind(const std::vector<std::string>& targets, const Value& value, Frame* frame);
  Status Append(std::string* out, const std::string& text) const;
  Status Locate(const Status& status, int line, int column);

  TemplateOptions options_;
  Frame* template_frame_ = nullptr;
  int64_t iterations_ = 0;
  int64_t work_bytes_ = 0;  // see TemplateOptions::max_work_bytes
  int call_depth_ = 0;
  int exec_depth_ = 0;
  bool error_located_ = false;
};

}  // namespace tern
