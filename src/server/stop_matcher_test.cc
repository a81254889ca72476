#include "server/stop_matcher.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tern {
namespace {

// Each piece pushed in turn releases the text given; then, if `flushed` is
// set, Flush releases it; `matched` is the matcher's state at the end.
struct StopCase {
  const char* what;
  std::vector<std::string> stops;
  std::vector<std::pair<const char*, const char*>> pushes;  // piece, released
  std::optional<std::string> flushed;
  bool matched;
};

TEST(StopMatcherTest, ReleasesHoldsAndCuts) {
  const StopCase cases[] = {
      {"no stops: text passes through", {}, {{"hello ", "hello "}, {"world", "world"}}, "", false},
      {"a held prefix is released when it breaks", {"END"}, {{"EN", ""}, {"x", "ENx"}}, {}, false},
      {"the earliest of several stops cuts", {"world", "lo w"}, {{"hello world", "hel"}}, {}, true},
      {"Flush releases a held prefix at the end", {"\n\n"}, {{"line\n", "line"}}, "\n", false},
      {"a stop inside one piece", {"."}, {{"Hi. There.", "Hi"}}, {}, true},
  };
  for (const StopCase& c : cases) {
    SCOPED_TRACE(c.what);
    StopMatcher m(c.stops);
    for (const auto& [piece, released] : c.pushes) EXPECT_EQ(m.Push(piece), released) << piece;
    if (c.flushed) {
      EXPECT_EQ(m.Flush(), *c.flushed);
    }
    EXPECT_EQ(m.matched(), c.matched);
  }
}

TEST(StopMatcherTest, HoldsBackPossiblePrefixAcrossPieces) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("the E"), "the ");
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("D and more"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.Push("later"), "");
  EXPECT_EQ(m.released_bytes(), 4u);
}

}  // namespace
}  // namespace tern
