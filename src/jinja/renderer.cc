#include "jinja/renderer.h"

#include <memory>

#include "jinja/builtins.h"
#include "jinja/operators.h"

namespace tern {

StatusOr<std::string> Renderer::Render(const StmtList& body, const Value& context) {
  Frame globals;
  globals.vars = BuiltinGlobals(options_);
  Frame context_frame;
  context_frame.parent = &globals;
  if (context.is_dict()) {
    // A private copy: templates may mutate lists and namespaces.
    Value copy = context.DeepCopy();
    context_frame.vars = copy.dict();
  } else if (!context.is_undefined() && !context.is_none()) {
    return InvalidArgument("template context must be a dict, got '" + context.TypeName() + "'");
  }
  Frame template_frame;
  template_frame.parent = &context_frame;
  template_frame_ = &template_frame;
  iterations_ = 0;
  call_depth_ = 0;
  exec_depth_ = 0;
  work_bytes_ = 0;
  error_located_ = false;
  std::string out;
  Flow flow = Flow::kNormal;
  Status status = ExecList(body, &template_frame, &out, &flow);
  template_frame_ = nullptr;
  if (!status.ok()) return status;
  return out;
}

// ------------------------------------------------------------------ scopes

const Value* Renderer::Lookup(const Frame* frame, const std::string& name) {
  for (; frame != nullptr; frame = frame->parent) {
    for (const auto& [key, value] : frame->vars) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Renderer::Assign(Frame* frame, const std::string& name, Value value) {
  for (auto& [key, v] : frame->vars) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  frame->vars.emplace_back(name, std::move(value));
}

Status Renderer::Bind(const std::vector<std::string>& targets, const Value& value, Frame* frame) {
  if (targets.size() == 1) {
    Assign(frame, targets[0], value);
    return Status::Ok();
  }
  TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(value));
  if (items.size() != targets.size()) {
    return InvalidArgument("cannot unpack " + std::to_string(items.size()) + " values into " +
                           std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) Assign(frame, targets[i], items[i]);
  return Status::Ok();
}

Status Renderer::Append(std::string* out, const std::string& text) const {
  if (out->size() + text.size() > options_.max_output_bytes) {
    return ResourceExhausted("template output larger than the limit of " +
                             std::to_string(options_.max_output_bytes) + " bytes");
  }
  out->append(text);
  return Status::Ok();
}

Status Renderer::Locate(const Status& status, int line, int column) {
  if (status.ok() || error_located_) return status;
  error_located_ = true;
  return Status(status.code(), "template line " + std::to_string(line) + ", column " +
                                   std::to_string(column) + ": " + status.message());
}

// ------------------------------------------------------------------ statements

Status Renderer::ExecList(const StmtList& body, Frame* frame, std::string* out, Flow* flow) {
  // Bounds the native stack: statement nesting times macro recursion.
  if (exec_depth_ >= 4 * options_.max_nesting_depth) {
    int line = body.empty() ? 0 : body[0]->line;
    int column = body.empty() ? 0 : body[0]->column;
    return Locate(ResourceExhausted("template rendering nested too deeply"), line, column);
  }
  ++exec_depth_;
  Status status;
  for (const StmtPtr& stmt : body) {
    status = Exec(*stmt, frame, out, flow);
    if (!status.ok() || *flow != Flow::kNormal) break;
  }
  --exec_depth_;
  return status;
}

Status Renderer::Exec(const Stmt& stmt, Frame* frame, std::string* out, Flow* flow) {
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      return Locate(Append(out, stmt.text), stmt.line, stmt.column);
    case Stmt::Kind::kOutput: {
      TERN_ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr, frame));
      return Locate(Append(out, v.ToString()), stmt.line, stmt.column);
    }
    case Stmt::Kind::kIf:
      for (const IfBranch& branch : stmt.branches) {
        TERN_ASSIGN_OR_RETURN(Value cond, Eval(*branch.condition, frame));
        if (cond.Truthy()) return ExecList(branch.body, frame, out, flow);
      }
      return ExecList(stmt.else_body, frame, out, flow);
    case Stmt::Kind::kFor:
      return ExecFor(stmt, frame, out);
    case Stmt::Kind::kSet:
      return ExecSet(stmt, frame);
    case Stmt::Kind::kSetBlock: {
      std::string text;
      Flow inner = Flow::kNormal;
      TERN_RETURN_IF_ERROR(ExecList(stmt.body, frame, &text, &inner));
      Assign(frame, stmt.name, Value(std::move(text)));
      return Status::Ok();
    }
    case Stmt::Kind::kMacro:
      return DefineMacro(stmt, frame);
    case Stmt::Kind::kBreak:
      *flow = Flow::kBreak;
      return Status::Ok();
    case Stmt::Kind::kContinue:
      *flow = Flow::kContinue;
      return Status::Ok();
    case Stmt::Kind::kFilterBlock: {
      std::string text;
      Flow inner = Flow::kNormal;
      TERN_RETURN_IF_ERROR(ExecList(stmt.body, frame, &text, &inner));
      Frame scope;
      scope.parent = frame;
      scope.vars.emplace_back(kFilterBlockBodyName, Value(std::move(text)));
      TERN_ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr, &scope));
      return Locate(Append(out, v.ToString()), stmt.line, stmt.column);
    }
  }
  return Status::Ok();
}

Status Renderer::ExecFor(const Stmt& stmt, Frame* frame, std::string* out) {
  TERN_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr, frame));
  StatusOr<ValueList> listed = Iterate(iterable);
  if (!listed.ok()) return Locate(listed.status(), stmt.line, stmt.column);
  ValueList items = std::move(listed).value();
  if (stmt.filter != nullptr) {
    ValueList kept;
    for (const Value& item : items) {
      if (++iterations_ > options_.max_loop_iterations) {
        return Locate(ResourceExhausted("more than " + std::to_string(options_.max_loop_iterations) +
                                        " loop iterations"),
                      stmt.line, stmt.column);
      }
      Frame scope;
      scope.parent = frame;
      TERN_RETURN_IF_ERROR(Locate(Bind(stmt.targets, item, &scope), stmt.line, stmt.column));
      TERN_ASSIGN_OR_RETURN(Value keep, Eval(*stmt.filter, &scope));
      if (keep.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t length = static_cast<int64_t>(items.size());
  // One `loop` object per for statement, updated in place each iteration.
  auto index = std::make_shared<int64_t>(0);
  Value loop = Value::Dict({
      {"index", Value(1)}, {"index0", Value(0)}, {"revindex", Value(length)},
      {"revindex0", Value(length - 1)}, {"first", Value(true)}, {"last", Value(length == 1)},
      {"length", Value(length)}, {"depth", Value(1)}, {"depth0", Value(0)},
      {"previtem", Value()}, {"nextitem", Value()},
  });
  loop.Set("cycle", Value::MakeFunction("cycle", [index](const CallArgs& args) -> StatusOr<Value> {
    if (args.positional.empty()) return InvalidArgument("loop.cycle() needs at least one value");
    return args.positional[static_cast<size_t>(*index) % args.positional.size()];
  }));
  ValueDict& fields = loop.dict();
  for (int64_t i = 0; i < length; ++i) {
    if (++iterations_ > options_.max_loop_iterations) {
      return Locate(ResourceExhausted("more than " + std::to_string(options_.max_loop_iterations) +
                                      " loop iterations"),
                    stmt.line, stmt.column);
    }
    *index = i;
    fields[0].second = Value(i + 1);
    fields[1].second = Value(i);
    fields[2].second = Value(length - i);
    fields[3].second = Value(length - i - 1);
    fields[4].second = Value(i == 0);
    fields[5].second = Value(i == length - 1);
    fields[9].second = i > 0 ? items[static_cast<size_t>(i - 1)] : Value();
    fields[10].second = i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value();
    Frame scope;
    scope.parent = frame;
    TERN_RETURN_IF_ERROR(Locate(Bind(stmt.targets, items[static_cast<size_t>(i)], &scope), stmt.line,
                                stmt.column));
    scope.vars.emplace_back("loop", loop);
    Flow flow = Flow::kNormal;
    TERN_RETURN_IF_ERROR(ExecList(stmt.body, &scope, out, &flow));
    if (flow == Flow::kBreak) break;
  }
  if (length == 0) {
    Flow flow = Flow::kNormal;
    TERN_RETURN_IF_ERROR(ExecList(stmt.else_body, frame, out, &flow));
  }
  return Status::Ok();
}

Status Renderer::ExecSet(const Stmt& stmt, Frame* frame) {
  TERN_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr, frame));
  if (stmt.attr.empty()) {
    return Locate(Bind(stmt.targets, value, frame), stmt.line, stmt.column);
  }
  const Value* target = Lookup(frame, stmt.name);
  if (target == nullptr || !target->is_dict()) {
    return Locate(InvalidArgument("cannot assign attribute '" + stmt.attr + "' of '" + stmt.name +
                                  "': not a namespace"),
                  stmt.line, stmt.column);
  }
  if (value.Reaches(*target)) {
    return Locate(InvalidArgument("cannot assign '" + stmt.name + "." + stmt.attr + "': a namespace "
                                  "cannot contain itself"),
                  stmt.line, stmt.column);
  }
  target->Set(stmt.attr, std::move(value));
  return Status::Ok();
}

Status Renderer::DefineMacro(const Stmt& stmt, Frame* frame) {
  const Stmt* macro = &stmt;
  Assign(frame, stmt.name, Value::MakeFunction(stmt.name, [this, macro](const CallArgs& args) {
           return CallMacro(*macro, args);
         }));
  return Status::Ok();
}

StatusOr<Value> Renderer::CallMacro(const Stmt& stmt, const CallArgs& args) {
  if (template_frame_ == nullptr) {
    return InvalidArgument("macro '" + stmt.name + "' called after its template finished rendering");
  }
  if (call_depth_ >= options_.max_call_depth) {
    return ResourceExhausted("macro calls nested deeper than " + std::to_string(options_.max_call_depth));
  }
  if (args.positional.size() > stmt.params.size()) {
    return InvalidArgument("macro '" + stmt.name + "' takes " + std::to_string(stmt.params.size()) +
                           " arguments, got " + std::to_string(args.positional.size()));
  }
  Frame scope;
  scope.parent = template_frame_;
  for (size_t i = 0; i < stmt.params.size(); ++i) {
    const MacroParam& param = stmt.params[i];
    const Value* given = args.Get(i, param.name);
    if (given != nullptr) {
      Assign(&scope, param.name, *given);
    } else if (param.default_value != nullptr) {
      TERN_ASSIGN_OR_RETURN(Value v, Eval(*param.default_value, &scope));
      Assign(&scope, param.name, std::move(v));
    } else {
      Assign(&scope, param.name, Value());
    }
  }
  for (const auto& [name, value] : args.keyword) {
    bool known = false;
    for (const MacroParam& p : stmt.params) known = known || p.name == name;
    if (!known) return InvalidArgument("macro '" + stmt.name + "' has no parameter '" + name + "'");
  }
  ++call_depth_;
  std::string text;
  Flow flow = Flow::kNormal;
  Status status = ExecList(stmt.body, &scope, &text, &flow);
  --call_depth_;
  TERN_RETURN_IF_ERROR(status);
  return Value(std::move(text));
}

// ------------------------------------------------------------------ expressions

StatusOr<Value> Renderer::Eval(const Expr& expr, Frame* frame) {
  StatusOr<Value> result = EvalInner(expr, frame);
  if (!result.ok()) return Locate(result.status(), expr.line, expr.column);
  // Values built here (not just looked up) count as work.
  if (expr.kind != Expr::Kind::kName && expr.kind != Expr::Kind::kGetAttr &&
      expr.kind != Expr::Kind::kGetItem && expr.kind != Expr::Kind::kLiteral) {
    const Value& v = *result;
    if (v.is_string()) work_bytes_ += (int64_t)v.string_value().size();
    if (v.is_list()) work_bytes_ += (int64_t)(v.list().size() * sizeof(Value));
    if (work_bytes_ > options_.max_work_bytes) {
      return Locate(ResourceExhausted("template work over the limit of " +
                                      std::to_string(options_.max_work_bytes) +
                                      " bytes built in one render"),
                    expr.line, expr.column);
    }
  }
  return result;
}

StatusOr<CallArgs> Renderer::EvalArgs(const Expr& expr, size_t first_arg, Frame* frame) {
  CallArgs args;
  for (size_t i = first_arg; i < expr.children.size(); ++i) {
    TERN_ASSIGN_OR_RETURN(Value v, Eval(*expr.children[i], frame));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, value_expr] : expr.kwargs) {
    TERN_ASSIGN_OR_RETURN(Value v, Eval(*value_expr, frame));
    args.keyword.emplace_back(name, std::move(v));
  }
  return args;
}

StatusOr<Value> Renderer::EvalInner(const Expr& expr, Frame* frame) {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.literal;
    case Expr::Kind::kName: {
      const Value* v = Lookup(frame, expr.name);
      return v != nullptr ? *v : Value();
    }
    case Expr::Kind::kList: {
      ValueList items;
      for (const ExprPtr& child : expr.children) {
        TERN_ASSIGN_OR_RETURN(Value v, Eval(*child, frame));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case Expr::Kind::kDict: {
      Value dict = Value::Dict();
      for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        TERN_ASSIGN_OR_RETURN(Value key, Eval(*expr.children[i], frame));
        TERN_ASSIGN_OR_RETURN(Value value, Eval(*expr.children[i + 1], frame));
        dict.Set(key.ToString(), std::move(value));
      }
      return dict;
    }
    case Expr::Kind::kGetAttr: {
      TERN_ASSIGN_OR_RETURN(Value object, Eval(*expr.children[0], frame));
      return GetAttr(object, expr.name);
    }
    case Expr::Kind::kGetItem: {
      TERN_ASSIGN_OR_RETURN(Value object, Eval(*expr.children[0], frame));
      TERN_ASSIGN_OR_RETURN(Value key, Eval(*expr.children[1], frame));
      return GetItem(object, key);
    }
    case Expr::Kind::kSlice: {
      TERN_ASSIGN_OR_RETURN(Value object, Eval(*expr.children[0], frame));
      Value parts[3];
      const Value* ptrs[3] = {nullptr, nullptr, nullptr};
      for (int i = 0; i < 3; ++i) {
        if (expr.children[static_cast<size_t>(i) + 1] == nullptr) continue;
        TERN_ASSIGN_OR_RETURN(parts[i], Eval(*expr.children[static_cast<size_t>(i) + 1], frame));
        ptrs[i] = &parts[i];
      }
      return Slice(object, ptrs[0], ptrs[1], ptrs[2]);
    }
    case Expr::Kind::kCall:
      return EvalCall(expr, frame);
    case Expr::Kind::kFilter: {
      TERN_ASSIGN_OR_RETURN(Value operand, Eval(*expr.children[0], frame));
      TERN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, frame));
      return ApplyFilter(expr.name, operand, args, options_);
    }
    case Expr::Kind::kTest: {
      TERN_ASSIGN_OR_RETURN(Value operand, Eval(*expr.children[0], frame));
      TERN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, frame));
      TERN_ASSIGN_OR_RETURN(bool result, ApplyTest(expr.name, operand, args));
      return Value(result != expr.negated);
    }
    case Expr::Kind::kUnary: {
      TERN_ASSIGN_OR_RETURN(Value operand, Eval(*expr.children[0], frame));
      if (expr.name == "not") return Value(!operand.Truthy());
      if (expr.name == "-") return UnaryMinus(operand);
      if (!operand.is_number() && !operand.is_bool()) {
        return InvalidArgument("bad operand type for unary +: '" + operand.TypeName() + "'");
      }
      return operand;
    }
    case Expr::Kind::kBinary:
      return EvalBinary(expr, frame);
    case Expr::Kind::kCompare:
      return EvalCompare(expr, frame);
    case Expr::Kind::kConditional: {
      TERN_ASSIGN_OR_RETURN(Value cond, Eval(*expr.children[1], frame));
      if (cond.Truthy()) return Eval(*expr.children[0], frame);
      if (expr.children[2] != nullptr) return Eval(*expr.children[2], frame);
      return Value();
    }
  }
  return Internal("unknown expression kind");
}

StatusOr<Value> Renderer::EvalCall(const Expr& expr, Frame* frame) {
  const Expr& callee = *expr.children[0];
  Value fn;
  std::string name = callee.kind == Expr::Kind::kName ? callee.name : "";
  if (callee.kind == Expr::Kind::kGetAttr) {
    TERN_ASSIGN_OR_RETURN(Value object, Eval(*callee.children[0], frame));
    TERN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, frame));
    TERN_ASSIGN_OR_RETURN(std::optional<Value> result, CallMethod(object, callee.name, args, options_));
    if (result.has_value()) return *result;
    fn = GetAttr(object, callee.name);
    if (!fn.is_function()) {
      return InvalidArgument("'" + object.TypeName() + "' object has no method '" + callee.name + "'");
    }
    return fn.function()(args);
  }
  TERN_ASSIGN_OR_RETURN(fn, Eval(callee, frame));
  if (!fn.is_function()) {
    if (fn.is_undefined() && !name.empty()) return InvalidArgument("'" + name + "' is undefined");
    return InvalidArgument("'" + fn.TypeName() + "' object is not callable");
  }
  TERN_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, frame));
  return fn.function()(args);
}

StatusOr<Value> Renderer::EvalBinary(const Expr& expr, Frame* frame) {
  TERN_ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0], frame));
  if (expr.name == "and") {
    if (!left.Truthy()) return left;
    return Eval(*expr.children[1], frame);
  }
  if (expr.name == "or") {
    if (left.Truthy()) return left;
    return Eval(*expr.children[1], frame);
  }
  TERN_ASSIGN_OR_RETURN(Value right, Eval(*expr.children[1], frame));
  return BinaryOp(expr.name, left, right, options_.max_output_bytes);
}

StatusOr<Value> Renderer::EvalCompare(const Expr& expr, Frame* frame) {
  TERN_ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0], frame));
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    TERN_ASSIGN_OR_RETURN(Value right, Eval(*expr.children[i + 1], frame));
    TERN_ASSIGN_OR_RETURN(bool ok, CompareOp(expr.ops[i], left, right));
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace tern
