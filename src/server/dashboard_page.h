// DashboardHtml: the dashboard page served at GET / and /dashboard — one
// self-contained HTML file (inline JS and SVG charts, no network beyond this
// server), src/server/dashboard/dashboard.html, compiled into the binary at
// build time by cmake/embed_text.cmake.
#pragma once

#include <string_view>

namespace tern {

std::string_view DashboardHtml();

}  // namespace tern
