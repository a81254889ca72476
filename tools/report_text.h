// Text helpers the report writers share (tern doctor, tern bench serve):
// printf of up to four numbers, and text made safe inside HTML/SVG.
#pragma once

#include <string>

namespace tern {

// snprintf(format, a, b, c, d) into a string (at most 511 bytes).
std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0);

// <, >, & and " as entities.
std::string HtmlEscape(const std::string& text);

}  // namespace tern
