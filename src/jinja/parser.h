// Parser: turns lexed segments into the statement/expression tree (ast.h).
// Grammar and operator precedence follow Jinja2: conditional expression <
// or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary -,+ <
// postfix (.attr, [index], [a:b:c], call) and filters/tests (`|f`, `is t`).
// Unknown filters, tests and tags are parse errors naming them; every error
// carries the line and column. Nesting is capped (max_nesting_depth).
// Statements are parsed in parser.cc, expressions in parser_expressions.cc.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/template_options.h"

namespace tern {

class Parser {
 public:
  Parser(std::vector<Segment> segments, const TemplateOptions& options);

  StatusOr<StmtList> Parse();

 private:
  // Statements.
  Status ParseBody(const std::vector<std::string_view>& end_tags, const Segment* opener,
                   StmtList* out, std::string* found_end);
  Status ParseStatement(const std::string& keyword, const Segment& segment, StmtList* out);
  Status ParseIf(const Segment& segment, StmtList* out);
  Status ParseFor(const Segment& segment, StmtList* out);
  Status ParseSet(const Segment& segment, StmtList* out);
  Status ParseMacro(const Segment& segment, StmtList* out);
  Status ParseFilterBlock(const Segment& segment, StmtList* out);

  // Expressions over the tokens of the current tag.
  StatusOr<ExprPtr> ParseExpression(bool allow_conditional = true);
  StatusOr<ExprPtr> ParseOr();
  StatusOr<ExprPtr> ParseAnd();
  StatusOr<ExprPtr> ParseNot();
  StatusOr<ExprPtr> ParseCompare();
  StatusOr<ExprPtr> ParseMath1();
  StatusOr<ExprPtr> ParseConcat();
  StatusOr<ExprPtr> ParseMath2();
  StatusOr<ExprPtr> ParsePow();
  StatusOr<ExprPtr> ParseUnary(bool with_filter);
  StatusOr<ExprPtr> ParseUnaryWithFilter() { return ParseUnary(true); }
  // One level of left-associative binary operators: operand (op operand)*,
  // where `op` is any of `ops` (an operator or a keyword such as "and").
  StatusOr<ExprPtr> ParseBinaryLevel(StatusOr<ExprPtr> (Parser::*operand)(),
                                     std::initializer_list<std::string_view> ops);
  StatusOr<ExprPtr> ParsePrimary();
  StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  StatusOr<ExprPtr> ParseFilter(ExprPtr operand);
  StatusOr<ExprPtr> ParseTest(ExprPtr operand);
  StatusOr<ExprPtr> ParseSubscript(ExprPtr object);
  StatusOr<ExprPtr> ParseCall(ExprPtr callee);  // at '(': callee(args)
  Status ParseCallArgs(Expr* call);

  // Token helpers.
  const Token& Peek(size_t ahead = 0) const;
  Token Next();
  bool AtOp(std::string_view op) const;
  bool AtName(std::string_view name) const;
  bool AcceptOp(std::string_view op);
  bool AcceptName(std::string_view name);
  Status ExpectOp(std::string_view op);
  StatusOr<std::string> ExpectName(std::string_view what);
  Status ExpectEnd();
  Status ErrorAt(const Token& token, const std::string& message) const;
  Status ErrorAt(int line, int column, const std::string& message) const;
  ExprPtr MakeExpr(Expr::Kind kind, const Token& at) const;
  StmtPtr MakeStmt(Stmt::Kind kind, const Segment& at) const;
  Status EnterNesting(const Token& at);
  static std::string Describe(const Token& token);

  // Counts nesting for the max_nesting_depth limit while in scope.
  class NestingGuard {
   public:
    explicit NestingGuard(int* depth);
    ~NestingGuard();
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    int* depth_;
  };

  std::vector<Segment> segments_;
  TemplateOptions options_;
  size_t segment_index_ = 0;
  const std::vector<Token>* tokens_ = nullptr;
  size_t token_index_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace tern
