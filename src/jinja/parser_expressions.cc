#include <algorithm>
#include <memory>
#include <utility>

#include "jinja/builtins.h"
#include "jinja/parser.h"

namespace tern {

// ---------------------------------------------------------------- expressions

StatusOr<ExprPtr> Parser::ParseExpression(bool allow_conditional) {
  NestingGuard guard(&depth_);
  TERN_RETURN_IF_ERROR(EnterNesting(Peek()));
  TERN_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  if (!allow_conditional) return expr;
  while (AtName("if")) {
    Token at = Next();
    auto cond = MakeExpr(Expr::Kind::kConditional, at);
    TERN_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    ExprPtr otherwise;
    if (AcceptName("else")) {
      TERN_ASSIGN_OR_RETURN(otherwise, ParseExpression());
    }
    cond->children.push_back(std::move(expr));
    cond->children.push_back(std::move(test));
    cond->children.push_back(std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

StatusOr<ExprPtr> Parser::ParseOr() { return ParseBinaryLevel(&Parser::ParseAnd, {"or"}); }

StatusOr<ExprPtr> Parser::ParseAnd() { return ParseBinaryLevel(&Parser::ParseNot, {"and"}); }

StatusOr<ExprPtr> Parser::ParseNot() {
  if (AtName("not")) {
    NestingGuard guard(&depth_);
    TERN_RETURN_IF_ERROR(EnterNesting(Peek()));
    Token at = Next();
    TERN_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    auto node = MakeExpr(Expr::Kind::kUnary, at);
    node->name = "not";
    node->children.push_back(std::move(operand));
    return node;
  }
  return ParseCompare();
}

StatusOr<ExprPtr> Parser::ParseCompare() {
  Token start = Peek();
  TERN_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr node;
  while (true) {
    std::string op;
    if (Peek().kind == Token::Kind::kOp &&
        (AtOp("==") || AtOp("!=") || AtOp("<") || AtOp("<=") || AtOp(">") || AtOp(">="))) {
      op = Next().text;
    } else if (AtName("in")) {
      Next();
      op = "in";
    } else if (AtName("not") && Peek(1).kind == Token::Kind::kName && Peek(1).text == "in") {
      Next();
      Next();
      op = "not in";
    } else {
      break;
    }
    if (node == nullptr) {
      node = MakeExpr(Expr::Kind::kCompare, start);
      node->children.push_back(std::move(first));
    }
    TERN_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    node->ops.push_back(op);
    node->children.push_back(std::move(operand));
  }
  if (node == nullptr) return first;
  return node;
}

StatusOr<ExprPtr> Parser::ParseBinaryLevel(StatusOr<ExprPtr> (Parser::*operand)(),
                                           std::initializer_list<std::string_view> ops) {
  TERN_ASSIGN_OR_RETURN(ExprPtr left, (this->*operand)());
  while (true) {
    const Token& t = Peek();
    const bool is_op = (t.kind == Token::Kind::kOp || t.kind == Token::Kind::kName) &&
                       std::find(ops.begin(), ops.end(), t.text) != ops.end();
    if (!is_op) return left;
    Token at = Next();
    TERN_ASSIGN_OR_RETURN(ExprPtr right, (this->*operand)());
    auto node = MakeExpr(Expr::Kind::kBinary, at);
    node->name = at.text;
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
}

StatusOr<ExprPtr> Parser::ParseMath1() {
  return ParseBinaryLevel(&Parser::ParseConcat, {"+", "-"});
}

StatusOr<ExprPtr> Parser::ParseConcat() { return ParseBinaryLevel(&Parser::ParseMath2, {"~"}); }

StatusOr<ExprPtr> Parser::ParseMath2() {
  return ParseBinaryLevel(&Parser::ParsePow, {"*", "/", "//", "%"});
}

StatusOr<ExprPtr> Parser::ParsePow() {
  return ParseBinaryLevel(&Parser::ParseUnaryWithFilter, {"**"});
}

StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  NestingGuard guard(&depth_);
  TERN_RETURN_IF_ERROR(EnterNesting(Peek()));
  ExprPtr node;
  if (AtOp("-") || AtOp("+")) {
    Token at = Next();
    TERN_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node = MakeExpr(Expr::Kind::kUnary, at);
    node->name = at.text;
    node->children.push_back(std::move(operand));
  } else {
    TERN_ASSIGN_OR_RETURN(node, ParsePrimary());
    TERN_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  }
  if (with_filter) return ParseFilterExpr(std::move(node));
  return node;
}

StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Peek();
  switch (t.kind) {
    case Token::Kind::kName: {
      Token at = Next();
      auto node = MakeExpr(Expr::Kind::kLiteral, at);
      if (at.text == "true" || at.text == "True") {
        node->literal = Value(true);
      } else if (at.text == "false" || at.text == "False") {
        node->literal = Value(false);
      } else if (at.text == "none" || at.text == "None") {
        node->literal = Value::None();
      } else {
        node->kind = Expr::Kind::kName;
        node->name = at.text;
      }
      return node;
    }
    case Token::Kind::kString: {
      Token at = Next();
      std::string text = at.text;
      while (Peek().kind == Token::Kind::kString) text += Next().text;  // adjacent literals join
      auto node = MakeExpr(Expr::Kind::kLiteral, at);
      node->literal = Value(std::move(text));
      return node;
    }
    case Token::Kind::kInt: {
      Token at = Next();
      auto node = MakeExpr(Expr::Kind::kLiteral, at);
      node->literal = Value(at.int_value);
      return node;
    }
    case Token::Kind::kFloat: {
      Token at = Next();
      auto node = MakeExpr(Expr::Kind::kLiteral, at);
      node->literal = Value(at.float_value);
      return node;
    }
    case Token::Kind::kOp:
      break;
    case Token::Kind::kEnd:
      return ErrorAt(t, "expected an expression, found end of tag");
  }
  Token at = Next();
  if (at.text == "(") {
    if (AcceptOp(")")) return MakeExpr(Expr::Kind::kList, at);  // empty tuple
    TERN_ASSIGN_OR_RETURN(ExprPtr inner, ParseExpression());
    if (AtOp(",")) {
      auto tuple = MakeExpr(Expr::Kind::kList, at);
      tuple->children.push_back(std::move(inner));
      while (AcceptOp(",")) {
        if (AtOp(")")) break;
        TERN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
        tuple->children.push_back(std::move(item));
      }
      inner = std::move(tuple);
    }
    TERN_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (at.text == "[") {
    auto list = MakeExpr(Expr::Kind::kList, at);
    while (!AtOp("]")) {
      TERN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      list->children.push_back(std::move(item));
      if (!AcceptOp(",")) break;
    }
    TERN_RETURN_IF_ERROR(ExpectOp("]"));
    return list;
  }
  if (at.text == "{") {
    auto dict = MakeExpr(Expr::Kind::kDict, at);
    while (!AtOp("}")) {
      TERN_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      TERN_RETURN_IF_ERROR(ExpectOp(":"));
      TERN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      dict->children.push_back(std::move(key));
      dict->children.push_back(std::move(value));
      if (!AcceptOp(",")) break;
    }
    TERN_RETURN_IF_ERROR(ExpectOp("}"));
    return dict;
  }
  return ErrorAt(at, "unexpected " + Describe(at));
}

StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (AtOp(".")) {
      Token at = Next();
      if (Peek().kind == Token::Kind::kInt) {
        Token index = Next();
        auto item = MakeExpr(Expr::Kind::kGetItem, at);
        auto literal = MakeExpr(Expr::Kind::kLiteral, index);
        literal->literal = Value(index.int_value);
        item->children.push_back(std::move(node));
        item->children.push_back(std::move(literal));
        node = std::move(item);
        continue;
      }
      TERN_ASSIGN_OR_RETURN(std::string attr, ExpectName("an attribute name"));
      auto get = MakeExpr(Expr::Kind::kGetAttr, at);
      get->name = std::move(attr);
      get->children.push_back(std::move(node));
      node = std::move(get);
    } else if (AtOp("[")) {
      TERN_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (AtOp("(")) {
      TERN_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> Parser::ParseCall(ExprPtr callee) {
  auto call = MakeExpr(Expr::Kind::kCall, Peek());
  call->children.push_back(std::move(callee));
  TERN_RETURN_IF_ERROR(ParseCallArgs(call.get()));
  return ExprPtr(std::move(call));
}

StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr object) {
  Token at = Next();  // '['
  ExprPtr start, stop, step;
  if (!AtOp(":")) {
    TERN_ASSIGN_OR_RETURN(start, ParseExpression());
  }
  if (!AcceptOp(":")) {
    TERN_RETURN_IF_ERROR(ExpectOp("]"));
    auto item = MakeExpr(Expr::Kind::kGetItem, at);
    item->children.push_back(std::move(object));
    item->children.push_back(std::move(start));
    return item;
  }
  if (!AtOp(":") && !AtOp("]")) {
    TERN_ASSIGN_OR_RETURN(stop, ParseExpression());
  }
  if (AcceptOp(":") && !AtOp("]")) {
    TERN_ASSIGN_OR_RETURN(step, ParseExpression());
  }
  TERN_RETURN_IF_ERROR(ExpectOp("]"));
  auto slice = MakeExpr(Expr::Kind::kSlice, at);
  slice->children.push_back(std::move(object));
  slice->children.push_back(std::move(start));
  slice->children.push_back(std::move(stop));
  slice->children.push_back(std::move(step));
  return slice;
}

Status Parser::ParseCallArgs(Expr* call) {
  TERN_RETURN_IF_ERROR(ExpectOp("("));
  while (!AtOp(")")) {
    if (Peek().kind == Token::Kind::kName && Peek(1).kind == Token::Kind::kOp && Peek(1).text == "=") {
      std::string name = Next().text;
      Next();  // '='
      TERN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->kwargs.emplace_back(std::move(name), std::move(value));
    } else {
      if (!call->kwargs.empty()) {
        return ErrorAt(Peek(), "positional argument after keyword argument");
      }
      TERN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->children.push_back(std::move(value));
    }
    if (!AcceptOp(",")) break;
  }
  return ExpectOp(")");
}

StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (AtOp("|")) {
      Next();
      TERN_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (AtName("is")) {
      Next();
      TERN_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (AtOp("(")) {
      TERN_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr operand) {
  Token at = Peek();
  TERN_ASSIGN_OR_RETURN(std::string name, ExpectName("a filter name"));
  while (AcceptOp(".")) {
    TERN_ASSIGN_OR_RETURN(std::string part, ExpectName("a filter name"));
    name += "." + part;
  }
  if (!IsKnownFilter(name)) return ErrorAt(at, "unknown filter '" + name + "'");
  auto filter = MakeExpr(Expr::Kind::kFilter, at);
  filter->name = std::move(name);
  filter->children.push_back(std::move(operand));
  if (AtOp("(")) TERN_RETURN_IF_ERROR(ParseCallArgs(filter.get()));
  return filter;
}

StatusOr<ExprPtr> Parser::ParseTest(ExprPtr operand) {
  Token at = Peek();
  auto test = MakeExpr(Expr::Kind::kTest, at);
  test->negated = AcceptName("not");
  at = Peek();
  TERN_ASSIGN_OR_RETURN(std::string name, ExpectName("a test name"));
  if (!IsKnownTest(name)) return ErrorAt(at, "unknown test '" + name + "'");
  test->name = std::move(name);
  test->children.push_back(std::move(operand));
  if (AtOp("(")) {
    TERN_RETURN_IF_ERROR(ParseCallArgs(test.get()));
    return test;
  }
  const Token& next = Peek();
  bool starts_primary = next.kind == Token::Kind::kName || next.kind == Token::Kind::kString ||
                        next.kind == Token::Kind::kInt || next.kind == Token::Kind::kFloat ||
                        AtOp("(") || AtOp("[") || AtOp("{");
  if (starts_primary && !AtName("else") && !AtName("or") && !AtName("and") && !AtName("if")) {
    TERN_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    TERN_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->children.push_back(std::move(arg));
  }
  return test;
}

}  // namespace tern
