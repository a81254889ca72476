#include "jinja/parser.h"

#include <algorithm>

#include "jinja/builtins.h"

namespace tern {
namespace {

std::string JoinTags(const std::vector<std::string_view>& tags) {
  std::string out;
  for (size_t i = 0; i < tags.size(); ++i) {
    if (i > 0) out += i + 1 == tags.size() ? " or " : ", ";
    out += "'" + std::string(tags[i]) + "'";
  }
  return out;
}

// A new expression or statement of `kind` at the source position of `at`.
template <class Node, class Kind, class Where>
std::unique_ptr<Node> MakeNode(Kind kind, const Where& at) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->line = at.line;
  node->column = at.column;
  return node;
}

bool IsEndLikeTag(std::string_view k) {
  return k == "elif" || k == "else" || k.substr(0, 3) == "end";
}

}  // namespace

Parser::NestingGuard::NestingGuard(int* depth) : depth_(depth) { ++*depth_; }
Parser::NestingGuard::~NestingGuard() { --*depth_; }

std::string Parser::Describe(const Token& token) {
  switch (token.kind) {
    case Token::Kind::kEnd: return "end of tag";
    case Token::Kind::kString: return "string";
    case Token::Kind::kInt:
    case Token::Kind::kFloat: return "number '" + token.text + "'";
    default: return "'" + token.text + "'";
  }
}

Parser::Parser(std::vector<Segment> segments, const TemplateOptions& options)
    : segments_(std::move(segments)), options_(options) {}

StatusOr<StmtList> Parser::Parse() {
  StmtList out;
  std::string found;
  TERN_RETURN_IF_ERROR(ParseBody({}, nullptr, &out, &found));
  return out;
}

Status Parser::ErrorAt(int line, int column, const std::string& message) const {
  return InvalidArgument("template line " + std::to_string(line) + ", column " +
                         std::to_string(column) + ": " + message);
}

Status Parser::ErrorAt(const Token& token, const std::string& message) const {
  return ErrorAt(token.line, token.column, message);
}

ExprPtr Parser::MakeExpr(Expr::Kind kind, const Token& at) const {
  return MakeNode<Expr>(kind, at);
}

StmtPtr Parser::MakeStmt(Stmt::Kind kind, const Segment& at) const {
  return MakeNode<Stmt>(kind, at);
}

Status Parser::EnterNesting(const Token& at) {
  if (depth_ > options_.max_nesting_depth) {
    return ErrorAt(at, "template nested too deeply (limit " +
                           std::to_string(options_.max_nesting_depth) + ")");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- tokens

const Token& Parser::Peek(size_t ahead) const {
  size_t i = std::min(token_index_ + ahead, tokens_->size() - 1);
  return (*tokens_)[i];
}

Token Parser::Next() {
  Token t = Peek();
  if (token_index_ + 1 < tokens_->size()) ++token_index_;
  return t;
}

bool Parser::AtOp(std::string_view op) const {
  return Peek().kind == Token::Kind::kOp && Peek().text == op;
}

bool Parser::AtName(std::string_view name) const {
  return Peek().kind == Token::Kind::kName && Peek().text == name;
}

bool Parser::AcceptOp(std::string_view op) {
  if (!AtOp(op)) return false;
  Next();
  return true;
}

bool Parser::AcceptName(std::string_view name) {
  if (!AtName(name)) return false;
  Next();
  return true;
}

Status Parser::ExpectOp(std::string_view op) {
  if (AcceptOp(op)) return Status::Ok();
  return ErrorAt(Peek(), "expected '" + std::string(op) + "', found " + Describe(Peek()));
}

StatusOr<std::string> Parser::ExpectName(std::string_view what) {
  if (Peek().kind != Token::Kind::kName) {
    return ErrorAt(Peek(), "expected " + std::string(what) + ", found " + Describe(Peek()));
  }
  return Next().text;
}

Status Parser::ExpectEnd() {
  if (Peek().kind == Token::Kind::kEnd) return Status::Ok();
  return ErrorAt(Peek(), "unexpected " + Describe(Peek()) + " (expected end of tag)");
}

// ---------------------------------------------------------------- statements

Status Parser::ParseBody(const std::vector<std::string_view>& end_tags, const Segment* opener,
                         StmtList* out, std::string* found_end) {
  NestingGuard guard(&depth_);
  if (depth_ > options_.max_nesting_depth) {
    const Segment& at = opener != nullptr ? *opener : segments_[0];
    return ErrorAt(at.line, at.column, "template nested too deeply");
  }
  while (segment_index_ < segments_.size()) {
    const Segment& segment = segments_[segment_index_++];
    if (segment.kind == Segment::Kind::kText) {
      auto text = MakeStmt(Stmt::Kind::kText, segment);
      text->text = segment.text;
      out->push_back(std::move(text));
      continue;
    }
    tokens_ = &segment.tokens;
    token_index_ = 0;
    if (segment.kind == Segment::Kind::kExpression) {
      auto output = MakeStmt(Stmt::Kind::kOutput, segment);
      TERN_ASSIGN_OR_RETURN(output->expr, ParseExpression());
      TERN_RETURN_IF_ERROR(ExpectEnd());
      out->push_back(std::move(output));
      continue;
    }
    if (Peek().kind != Token::Kind::kName) {
      return ErrorAt(Peek(), "expected a tag name, found " + Describe(Peek()));
    }
    std::string keyword = Next().text;
    if (std::find(end_tags.begin(), end_tags.end(), keyword) != end_tags.end()) {
      *found_end = keyword;
      return Status::Ok();
    }
    if (IsEndLikeTag(keyword)) {
      std::string msg = "unexpected '{% " + keyword + " %}'";
      if (!end_tags.empty()) msg += " (expected " + JoinTags(end_tags) + ")";
      return ErrorAt(segment.line, segment.column, msg);
    }
    TERN_RETURN_IF_ERROR(ParseStatement(keyword, segment, out));
  }
  if (!end_tags.empty()) {
    std::string msg = "unexpected end of template: missing " + JoinTags(end_tags);
    if (opener != nullptr) {
      return ErrorAt(opener->line, opener->column, msg + " for the tag opened here");
    }
    return ErrorAt(1, 1, msg);
  }
  return Status::Ok();
}

Status Parser::ParseStatement(const std::string& keyword, const Segment& segment, StmtList* out) {
  if (keyword == "if") return ParseIf(segment, out);
  if (keyword == "for") return ParseFor(segment, out);
  if (keyword == "set") return ParseSet(segment, out);
  if (keyword == "macro") return ParseMacro(segment, out);
  if (keyword == "filter") return ParseFilterBlock(segment, out);
  if (keyword == "break" || keyword == "continue") {
    TERN_RETURN_IF_ERROR(ExpectEnd());
    if (loop_depth_ == 0) {
      return ErrorAt(segment.line, segment.column, "'" + keyword + "' outside of a loop");
    }
    out->push_back(MakeStmt(keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, segment));
    return Status::Ok();
  }
  if (keyword == "generation") {
    // Marks assistant text for training masks; renders its body unchanged.
    TERN_RETURN_IF_ERROR(ExpectEnd());
    std::string found;
    TERN_RETURN_IF_ERROR(ParseBody({"endgeneration"}, &segment, out, &found));
    return ExpectEnd();
  }
  return ErrorAt(segment.line, segment.column, "unknown tag '" + keyword + "'");
}

Status Parser::ParseIf(const Segment& segment, StmtList* out) {
  auto stmt = MakeStmt(Stmt::Kind::kIf, segment);
  while (true) {
    IfBranch branch;
    TERN_ASSIGN_OR_RETURN(branch.condition, ParseExpression());
    TERN_RETURN_IF_ERROR(ExpectEnd());
    std::string found;
    TERN_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &segment, &branch.body, &found));
    stmt->branches.push_back(std::move(branch));
    if (found == "elif") continue;
    TERN_RETURN_IF_ERROR(ExpectEnd());
    if (found == "else") {
      TERN_RETURN_IF_ERROR(ParseBody({"endif"}, &segment, &stmt->else_body, &found));
      TERN_RETURN_IF_ERROR(ExpectEnd());
    }
    break;
  }
  out->push_back(std::move(stmt));
  return Status::Ok();
}

Status Parser::ParseFor(const Segment& segment, StmtList* out) {
  auto stmt = MakeStmt(Stmt::Kind::kFor, segment);
  bool paren = AcceptOp("(");
  do {
    TERN_ASSIGN_OR_RETURN(std::string target, ExpectName("a loop variable"));
    stmt->targets.push_back(std::move(target));
  } while (AcceptOp(","));
  if (paren) TERN_RETURN_IF_ERROR(ExpectOp(")"));
  if (!AcceptName("in")) return ErrorAt(Peek(), "expected 'in', found " + Describe(Peek()));
  TERN_ASSIGN_OR_RETURN(stmt->expr, ParseExpression(/*allow_conditional=*/false));
  if (AcceptName("if")) {
    TERN_ASSIGN_OR_RETURN(stmt->filter, ParseExpression());
  }
  if (AtName("recursive")) return ErrorAt(Peek(), "recursive loops are not supported");
  TERN_RETURN_IF_ERROR(ExpectEnd());
  std::string found;
  ++loop_depth_;
  Status body = ParseBody({"else", "endfor"}, &segment, &stmt->body, &found);
  --loop_depth_;
  TERN_RETURN_IF_ERROR(body);
  TERN_RETURN_IF_ERROR(ExpectEnd());
  if (found == "else") {
    // `break` in a for-else body refers to an enclosing loop, if any.
    TERN_RETURN_IF_ERROR(ParseBody({"endfor"}, &segment, &stmt->else_body, &found));
    TERN_RETURN_IF_ERROR(ExpectEnd());
  }
  out->push_back(std::move(stmt));
  return Status::Ok();
}

Status Parser::ParseSet(const Segment& segment, StmtList* out) {
  TERN_ASSIGN_OR_RETURN(std::string first, ExpectName("a variable name"));
  if (AcceptOp(".")) {
    auto stmt = MakeStmt(Stmt::Kind::kSet, segment);
    stmt->name = first;
    TERN_ASSIGN_OR_RETURN(stmt->attr, ExpectName("an attribute name"));
    TERN_RETURN_IF_ERROR(ExpectOp("="));
    TERN_ASSIGN_OR_RETURN(stmt->expr, ParseExpression());
    TERN_RETURN_IF_ERROR(ExpectEnd());
    out->push_back(std::move(stmt));
    return Status::Ok();
  }
  std::vector<std::string> targets = {first};
  while (AcceptOp(",")) {
    TERN_ASSIGN_OR_RETURN(std::string name, ExpectName("a variable name"));
    targets.push_back(std::move(name));
  }
  if (AcceptOp("=")) {
    auto stmt = MakeStmt(Stmt::Kind::kSet, segment);
    stmt->targets = std::move(targets);
    Token at = Peek();
    TERN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    if (AtOp(",")) {  // `set a, b = 1, 2`: the right side is a tuple
      auto tuple = MakeExpr(Expr::Kind::kList, at);
      tuple->children.push_back(std::move(value));
      while (AcceptOp(",")) {
        if (Peek().kind == Token::Kind::kEnd) break;
        TERN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
        tuple->children.push_back(std::move(item));
      }
      value = std::move(tuple);
    }
    stmt->expr = std::move(value);
    TERN_RETURN_IF_ERROR(ExpectEnd());
    out->push_back(std::move(stmt));
    return Status::Ok();
  }
  if (targets.size() != 1) return ErrorAt(Peek(), "expected '=' after set targets");
  TERN_RETURN_IF_ERROR(ExpectEnd());
  auto stmt = MakeStmt(Stmt::Kind::kSetBlock, segment);
  stmt->name = first;
  std::string found;
  TERN_RETURN_IF_ERROR(ParseBody({"endset"}, &segment, &stmt->body, &found));
  TERN_RETURN_IF_ERROR(ExpectEnd());
  out->push_back(std::move(stmt));
  return Status::Ok();
}

Status Parser::ParseMacro(const Segment& segment, StmtList* out) {
  auto stmt = MakeStmt(Stmt::Kind::kMacro, segment);
  TERN_ASSIGN_OR_RETURN(stmt->name, ExpectName("a macro name"));
  TERN_RETURN_IF_ERROR(ExpectOp("("));
  while (!AtOp(")")) {
    MacroParam param;
    TERN_ASSIGN_OR_RETURN(param.name, ExpectName("a parameter name"));
    if (AcceptOp("=")) {
      TERN_ASSIGN_OR_RETURN(param.default_value, ParseExpression());
    }
    stmt->params.push_back(std::move(param));
    if (!AcceptOp(",")) break;
  }
  TERN_RETURN_IF_ERROR(ExpectOp(")"));
  TERN_RETURN_IF_ERROR(ExpectEnd());
  std::string found;
  int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // break/continue cannot cross a macro boundary
  Status body = ParseBody({"endmacro"}, &segment, &stmt->body, &found);
  loop_depth_ = saved_loop_depth;
  TERN_RETURN_IF_ERROR(body);
  if (Peek().kind == Token::Kind::kName && Peek().text == stmt->name) Next();
  TERN_RETURN_IF_ERROR(ExpectEnd());
  out->push_back(std::move(stmt));
  return Status::Ok();
}

Status Parser::ParseFilterBlock(const Segment& segment, StmtList* out) {
  auto stmt = MakeStmt(Stmt::Kind::kFilterBlock, segment);
  // The filtered value is the rendered body, bound to a reserved name.
  auto operand = MakeExpr(Expr::Kind::kName, Peek());
  operand->name = kFilterBlockBodyName;
  TERN_ASSIGN_OR_RETURN(ExprPtr chain, ParseFilter(std::move(operand)));
  while (AcceptOp("|")) {
    TERN_ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
  }
  TERN_RETURN_IF_ERROR(ExpectEnd());
  stmt->expr = std::move(chain);
  std::string found;
  TERN_RETURN_IF_ERROR(ParseBody({"endfilter"}, &segment, &stmt->body, &found));
  TERN_RETURN_IF_ERROR(ExpectEnd());
  out->push_back(std::move(stmt));
  return Status::Ok();
}

}  // namespace tern
