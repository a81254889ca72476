// End-to-end tests of `tern tokenize` and `tern detokenize`.
#include <gtest/gtest.h>

#include <sstream>

#include "base/paths.h"
#include "gguf/gguf_file.h"
#include "tests/cli_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tern {
namespace {

using testing::CountLines;
using testing::RunTern;
using testing::ShellQuote;

void ExpectOneLineError(const testing::CliResult& r, const std::string& command,
                        const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tern " + command + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

std::vector<int32_t> LibraryEncode(const std::string& text, bool add_special) {
  auto file = gguf::GgufFile::Open(DefaultModelPath());
  EXPECT_TRUE(file.ok());
  auto vocab = Vocab::FromGguf(**file);
  EXPECT_TRUE(vocab.ok());
  auto tok = Tokenizer::Create(std::move(*vocab));
  EXPECT_TRUE(tok.ok());
  return (*tok)->Encode(text, add_special, false);
}

TEST(TokenizeCliTest, IdsMatchTheLibrary) {
  SKIP_WITHOUT_BINARY();
  const auto r = RunTern("tokenize --ids -m " + ShellQuote(DefaultModelPath()) +
                         " -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const std::vector<int32_t> ids = LibraryEncode("Once upon a time", true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);  // BOS
  EXPECT_EQ(r.out, JoinIds(ids) + "\n");
}

TEST(TokenizeCliTest, DefaultOutputIsOneIdAndPiecePerLine) {
  SKIP_WITHOUT_BINARY();
  const auto r = RunTern("tokenize --no-bos -p 'Once upon'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int32_t> ids = LibraryEncode("Once upon", false);
  EXPECT_EQ(CountLines(r.out), (int)ids.size()) << r.out;
  EXPECT_EQ(r.out.rfind(std::to_string(ids[0]) + "\t\xe2\x96\x81Once\n", 0), 0u) << r.out;
}

TEST(TokenizeCliTest, FileIsTokenizedByteForByte) {
  SKIP_WITHOUT_BINARY();
  testing::TempDir dir;
  const std::string text = "Once upon a time\n\n";
  ASSERT_TRUE(testing::WriteFileBytes(dir.File("in.txt"), text));
  const auto r = RunTern("tokenize --ids --no-bos -f " + ShellQuote(dir.File("in.txt")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, JoinIds(LibraryEncode(text, false)) + "\n");
}

TEST(TokenizeCliTest, DetokenizeRoundTrips) {
  SKIP_WITHOUT_BINARY();
  const std::string text = "Once upon a time, there was a little girl.";
  const auto ids = RunTern("tokenize --ids --no-bos -p " + ShellQuote(text));
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  ASSERT_TRUE(ids.out.ends_with("\n"));
  const std::string id_list = ids.out.substr(0, ids.out.size() - 1);
  const auto back = RunTern("detokenize " + id_list);
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, text + "\n");
  // Ids on standard input work too.
  const auto piped = RunTern("detokenize", ids.out);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, text + "\n");
  // BOS renders as its text unless skipped.
  const auto with_bos = RunTern("detokenize --skip-special 1 " + id_list);
  EXPECT_EQ(with_bos.out, text + "\n");
}

TEST(TokenizeCliTest, MissingModelIsAOneLineError) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("tokenize -m /nonexistent/model.gguf -p hi"), "tokenize",
                     "/nonexistent/model.gguf");
  ExpectOneLineError(RunTern("detokenize -m /nonexistent/model.gguf 1"), "detokenize",
                     "/nonexistent/model.gguf");
}

TEST(TokenizeCliTest, NonGgufAndTruncatedFilesAreOneLineErrors) {
  SKIP_WITHOUT_BINARY();
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFileBytes(dir.File("text.gguf"), "hello, not a model"));
  ExpectOneLineError(RunTern("tokenize -m " + ShellQuote(dir.File("text.gguf")) + " -p hi"),
                     "tokenize", "text.gguf");
  const std::string model = testing::ReadFileBytes(DefaultModelPath());
  ASSERT_TRUE(testing::WriteFileBytes(dir.File("cut.gguf"), model.substr(0, 2000)));
  ExpectOneLineError(RunTern("tokenize -m " + ShellQuote(dir.File("cut.gguf")) + " -p hi"),
                     "tokenize", "cut.gguf");
}

TEST(TokenizeCliTest, BadIdsAreOneLineErrors) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("detokenize 1 99999"), "detokenize", "99999");
  ExpectOneLineError(RunTern("detokenize 1 abc"), "detokenize", "abc");
}

TEST(TokenizeCliTest, InputIsRequired) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("tokenize"), "tokenize", "-p");
  ExpectOneLineError(RunTern("tokenize -p a -f b"), "tokenize", "not both");
}

}  // namespace
}  // namespace tern
