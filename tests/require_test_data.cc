// Linked into every gtest binary: with TERN_REQUIRE_TEST_DATA=1 (set by
// .ci/run) a skipped test fails the run instead, unless its skip names a
// CPU feature this machine lacks, a case that has its own test ("own ...")
// or running as root. So a CI without ../shared/models cannot pass silently.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

bool AllowedSkip(const std::string& message) {
  for (const char* ok : {"CPU lacks", "CPU or OS lacks", "own 512-bit tile", "root writes"}) {
    if (message.find(ok) != std::string::npos) return true;
  }
  return false;
}

class RequireTestData : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    if (!r->Skipped()) return;
    std::string message;
    for (int i = 0; i < r->total_part_count(); ++i) {
      const ::testing::TestPartResult& part = r->GetTestPartResult(i);
      if (part.skipped()) message += part.message();
    }
    if (AllowedSkip(message)) return;
    bad_.push_back(std::string(info.test_suite_name()) + "." + info.name() + ": " + message);
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (bad_.empty()) return;
    std::fprintf(stderr, "\nTERN_REQUIRE_TEST_DATA=1: %zu test(s) skipped for a reason other than "
                         "a missing CPU feature:\n", bad_.size());
    for (const std::string& b : bad_) std::fprintf(stderr, "  %s\n", b.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(1);
  }

 private:
  std::vector<std::string> bad_;
};

const bool kRegistered = [] {
  const char* env = std::getenv("TERN_REQUIRE_TEST_DATA");
  if (env != nullptr && std::string(env) == "1") {
    ::testing::UnitTest::GetInstance()->listeners().Append(new RequireTestData);
  }
  return true;
}();

}  // namespace
