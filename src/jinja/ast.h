// Ast: the parsed form of a template — expression and statement nodes.
// Produced by Parser, read-only afterwards (rendering never mutates it, so a
// parsed template may be rendered from several threads at once).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tern {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    kLiteral,      // literal
    kName,         // name
    kList,         // children: items
    kDict,         // children: key, value, key, value, ...
    kGetAttr,      // children[0] . name
    kGetItem,      // children[0] [ children[1] ]
    kSlice,        // children[0] [ children[1] : children[2] : children[3] ] (parts may be null)
    kCall,         // children[0] ( children[1..], kwargs )
    kFilter,       // children[0] | name ( children[1..], kwargs )
    kTest,         // children[0] is [not] name ( children[1..] )
    kUnary,        // name in {not, -, +} children[0]
    kBinary,       // children[0] name children[1]; name in {and, or, +, -, *, /, //, %, **, ~, in, not in}
    kCompare,      // children[0] ops[0] children[1] ops[1] children[2] ...
    kConditional,  // children[0] if children[1] else children[2] (else may be null)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  int column = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct IfBranch {
  ExprPtr condition;
  StmtList body;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches (if, elif...), else_body
    kFor,       // for targets in expr [if filter]: body, else_body
    kSet,       // set targets = expr, or set name.attr = expr
    kSetBlock,  // set name: body
    kMacro,     // macro name(params): body
    kBreak,
    kContinue,
    kFilterBlock,  // filter expr (a kFilter over a null operand): body
  };
  Kind kind = Kind::kText;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string name;
  std::string attr;
  std::vector<IfBranch> branches;
  std::vector<MacroParam> params;
  StmtList body;
  StmtList else_body;
};

}  // namespace tern
