#include "base/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace tern {
namespace {

// A tmpfile() the Progress writes to, read back whole.
class Sink {
 public:
  Sink() : f_(std::tmpfile()) {}
  ~Sink() {
    if (f_) std::fclose(f_);
  }
  FILE* file() const { return f_; }
  std::string Text() const {
    std::fflush(f_);
    std::rewind(f_);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  FILE* f_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// Each test writes to its own sink at its own clock.
class ProgressTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(sink.file(), nullptr); }

  // Options that write to the sink in log or terminal mode, timed by `clock`.
  Progress::Options Options(bool terminal) {
    Progress::Options o;
    o.out = sink.file();
    o.terminal = terminal;
    o.now_s = [this] { return clock; };
    return o;
  }

  Sink sink;
  double clock = 0;
};

TEST_F(ProgressTest, FileIsNotATerminal) {
  Progress::Options o;
  o.out = sink.file();
  Progress p("t", "items", 3, o);
  EXPECT_FALSE(p.terminal());
}

TEST_F(ProgressTest, LogModeWritesAPlainLinePerTenPercentAndOneFinalLine) {
  // The clock stays at 0: only the 10% steps write.
  Progress p("perplexity", "chunks", 100, Options(/*terminal=*/false));
  for (int done = 1; done <= 100; ++done) p.Update(done, "ppl " + std::to_string(done));
  p.Finish("ppl 100");
  const std::string text = sink.Text();
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  const std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 10u) << text;  // 10%..90% and the final line
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const int done = 10 * (int)(i + 1);
    EXPECT_EQ(lines[i], "perplexity: " + std::to_string(done) + "/100 chunks (" +
                            std::to_string(done) + "%), ppl " + std::to_string(done) + ", 0.0 s");
  }
  EXPECT_EQ(lines.back(), "perplexity: 100/100 chunks (100%), ppl 100, 0.0 s");
  EXPECT_EQ(text.back(), '\n');
}

TEST_F(ProgressTest, LogModeWritesALineAfterTheIntervalEvenWithoutAStep) {
  Progress p("batch", "requests", 1000, Options(/*terminal=*/false));
  for (int done = 1; done <= 5; ++done) {
    clock += 3.0;  // lines at 6 s and 12 s: 5 s since the last one
    p.Update(done);
  }
  p.Finish();
  const std::vector<std::string> lines = Lines(sink.Text());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "batch: 2/1000 requests (0%), 6.0 s");
  EXPECT_EQ(lines[1], "batch: 4/1000 requests (0%), 12.0 s");
  EXPECT_EQ(lines[2], "batch: 5/1000 requests (0%), 15.0 s");
}

TEST_F(ProgressTest, FinishWritesOnceAndLaterUpdatesAreIgnored) {
  Progress p("x", "", 4, Options(/*terminal=*/false));
  p.Update(4);  // done == total: left to Finish
  p.Finish();
  p.Finish();
  p.Update(2);
  EXPECT_EQ(sink.Text(), "x: 4/4 (100%), 0.0 s\n");
}

TEST_F(ProgressTest, TerminalModeRedrawsOneLineInPlace) {
  Progress p("imatrix", "chunks", 3, Options(/*terminal=*/true));
  for (int done = 1; done <= 3; ++done) {
    clock += 1.0;
    p.Update(done, done == 1 ? "a longer detail" : "short");
  }
  p.Finish("short");
  const std::string text = sink.Text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 4) << text;  // 3 updates + final
  EXPECT_NE(text.find("\rimatrix [" + std::string(10, '#') + std::string(20, '.') +
                      "] 1/3 chunks, a longer detail"),
            std::string::npos)
      << text;
  // The final bar is full; the bar after the longer first one blanks it out.
  const size_t last = text.rfind('\r');
  const std::string final_bar = text.substr(last + 1, text.size() - last - 2);
  EXPECT_EQ(final_bar, "imatrix [" + std::string(30, '#') + "] 3/3 chunks, short");
  const size_t second = text.find('\r', 1), third = text.find('\r', second + 1);
  const std::string first_bar = text.substr(1, second - 1);
  const std::string second_bar = text.substr(second + 1, third - second - 1);
  EXPECT_EQ(second_bar.size(), first_bar.size());
  EXPECT_EQ(second_bar.substr(second_bar.find("short") + 5),
            std::string(first_bar.size() - second_bar.find("short") - 5, ' '));
}

TEST_F(ProgressTest, TerminalModeRedrawsAtMostEveryInterval) {
  Progress p("synth", "layers", 100, Options(/*terminal=*/true));
  for (int done = 1; done <= 100; ++done) p.Update(done);  // clock frozen: one draw
  p.Finish();
  const std::string text = sink.Text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 2) << text;
  EXPECT_NE(text.find("100/100 layers\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tern
