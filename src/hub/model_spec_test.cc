#include "hub/model_spec.h"

#include <gtest/gtest.h>

namespace tern::hub {
namespace {

TEST(ModelSpecTest, ParsesRepoOnly) {
  StatusOr<ModelSpec> s = ParseModelSpec("ggml-org/models");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->org, "ggml-org");
  EXPECT_EQ(s->repo, "models");
  EXPECT_EQ(s->file, "");
  EXPECT_EQ(s->quant, "");
  EXPECT_EQ(s->ToString(), "ggml-org/models");
}

TEST(ModelSpecTest, ParsesQuantTag) {
  StatusOr<ModelSpec> s = ParseModelSpec("Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->repo, "Qwen2.5-0.5B-Instruct-GGUF");
  EXPECT_EQ(s->quant, "q8_0");
  EXPECT_EQ(s->ToString(), "Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0");
}

TEST(ModelSpecTest, ParsesFileAndPathInsideRepo) {
  StatusOr<ModelSpec> s = ParseModelSpec("ggml-org/models-moved/tinyllamas/stories260K.gguf");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->org, "ggml-org");
  EXPECT_EQ(s->repo, "models-moved");
  EXPECT_EQ(s->file, "tinyllamas/stories260K.gguf");
  EXPECT_EQ(s->ToString(), "ggml-org/models-moved/tinyllamas/stories260K.gguf");
}

TEST(ModelSpecTest, RejectsMalformedSpecsWithTheReason) {
  const struct {
    const char* text;
    const char* needle;
  } cases[] = {
      {"justaname", "expected ORG/REPO"},
      {"", "expected ORG/REPO"},
      {"/repo", "empty organisation"},
      {"org/", "empty repository"},
      {"org/repo:", "empty quantization tag"},
      {"../repo", "cannot be '..'"},
      {"org/re po", "may hold only"},
      {"org/repo/../../etc/x.gguf", "'..' segment"},
      {"org/repo/dir//x.gguf", "empty"},
      {"org/repo/readme.md", "not a .gguf file"},
      {"org/repo/x.gguf:Q4_0", "either a file or a ':QUANT' tag"},
      {"org/repo:Q4/0", "may hold only"},
  };
  for (const auto& c : cases) {
    StatusOr<ModelSpec> s = ParseModelSpec(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.status().message().find(c.needle), std::string::npos)
        << c.text << ": " << s.status().message();
  }
}

TEST(ModelSpecTest, RefusesASplitPartByName) {
  StatusOr<ModelSpec> s = ParseModelSpec("o/r/big-Q8_0-00002-of-00004.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("split into 4 files"), std::string::npos)
      << s.status().message();
  EXPECT_TRUE(ParseModelSpec("o/r/one-00001-of-00001.gguf").ok());
}

TEST(ModelSpecTest, RepoPathValidation) {
  EXPECT_TRUE(ValidateRepoPath("a/b/c.gguf").ok());
  EXPECT_FALSE(ValidateRepoPath("/abs.gguf").ok());
  EXPECT_FALSE(ValidateRepoPath("a/./b.gguf").ok());
  EXPECT_FALSE(ValidateRepoPath("a\\b.gguf").ok());
  EXPECT_FALSE(ValidateRepoPath("a\nb.gguf").ok());
}

TEST(ModelSpecTest, SplitGgufParts) {
  EXPECT_EQ(SplitGgufParts("m-Q4_K_M-00001-of-00003.gguf"), 3);
  EXPECT_EQ(SplitGgufParts("m-Q4_K_M-00001-of-00001.gguf"), 1);
  EXPECT_EQ(SplitGgufParts("m-Q4_K_M.gguf"), 0);
  EXPECT_EQ(SplitGgufParts("00001-of-00003.gguf"), 0);  // no '-' before
}

const std::vector<std::string> kFiles = {
    "README.md",          "model-Q8_0.gguf",   "model-Q4_K_S.gguf", "model-Q4_K_M.gguf",
    "model-q4_k.gguf",    "mmproj-Q4_K_M.gguf", "config.json",
};

TEST(ModelSpecTest, SelectsQuantCaseInsensitively) {
  StatusOr<std::string> f = SelectGgufFile(kFiles, "q8_0", "o/r");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, "model-Q8_0.gguf");
}

TEST(ModelSpecTest, WholeTokenMatchBeatsSubstring) {
  StatusOr<std::string> f = SelectGgufFile(kFiles, "Q4_K", "o/r");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, "model-q4_k.gguf");
}

TEST(ModelSpecTest, DefaultPrefersQ4KMAndSkipsProjectors) {
  StatusOr<std::string> f = SelectGgufFile(kFiles, "", "o/r");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, "model-Q4_K_M.gguf");
}

TEST(ModelSpecTest, DefaultFallsBackToFirstGgufByName) {
  StatusOr<std::string> f = SelectGgufFile({"z-F16.gguf", "a-Q8_0.gguf", "x.txt"}, "", "o/r");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, "a-Q8_0.gguf");
}

TEST(ModelSpecTest, MissingQuantListsTheFiles) {
  StatusOr<std::string> f = SelectGgufFile(kFiles, "IQ2_XS", "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("o/r has no .gguf file matching 'IQ2_XS'"),
            std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("model-Q8_0.gguf"), std::string::npos);
}

TEST(ModelSpecTest, NoGgufAtAll) {
  StatusOr<std::string> f = SelectGgufFile({"README.md"}, "", "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("o/r holds no .gguf file"), std::string::npos);
}

TEST(ModelSpecTest, RefusesSplitFilesClearly) {
  StatusOr<std::string> f =
      SelectGgufFile({"big-Q4_K_M-00001-of-00002.gguf", "big-Q4_K_M-00002-of-00002.gguf"}, "",
                     "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(f.status().message().find("split into 2 files"), std::string::npos)
      << f.status().message();
}

}  // namespace
}  // namespace tern::hub
