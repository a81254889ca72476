#include "jinja/template.h"

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/renderer.h"

namespace tern {

StatusOr<Template> Template::Parse(std::string_view source, TemplateOptions options) {
  TERN_ASSIGN_OR_RETURN(std::vector<Segment> segments, LexTemplate(source, options));
  Parser parser(std::move(segments), options);
  TERN_ASSIGN_OR_RETURN(StmtList body, parser.Parse());
  return Template(std::make_shared<const StmtList>(std::move(body)), options);
}

StatusOr<std::string> Template::Render(const Value& context) const {
  Renderer renderer(options_);
  return renderer.Render(*body_, context);
}

}  // namespace tern
