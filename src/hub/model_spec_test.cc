#include "hub/model_spec.h"

#include <gtest/gtest.h>

namespace tern::hub {
namespace {

TEST(ModelSpecTest, ParsesRepoQuantTagAndFileInsideRepo) {
  const struct {
    const char* text;
    const char* org;
    const char* repo;
    const char* file;
    const char* quant;
  } cases[] = {
      {"ggml-org/models", "ggml-org", "models", "", ""},
      {"Qwen/Qwen2.5-0.5B-Instruct-GGUF:q8_0", "Qwen", "Qwen2.5-0.5B-Instruct-GGUF", "", "q8_0"},
      {"ggml-org/models-moved/tinyllamas/stories260K.gguf", "ggml-org", "models-moved",
       "tinyllamas/stories260K.gguf", ""},
  };
  for (const auto& c : cases) {
    StatusOr<ModelSpec> s = ParseModelSpec(c.text);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->org, c.org);
    EXPECT_EQ(s->repo, c.repo);
    EXPECT_EQ(s->file, c.file);
    EXPECT_EQ(s->quant, c.quant);
    EXPECT_EQ(s->ToString(), c.text);
  }
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
  for (const char* bad : {"/abs.gguf", "a/./b.gguf", "a\\b.gguf", "a\nb.gguf"}) {
    EXPECT_FALSE(ValidateRepoPath(bad).ok()) << bad;
  }
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

TEST(ModelSpecTest, SelectsTheFileForATag) {
  const struct {
    const char* what;
    std::vector<std::string> files;
    const char* quant;
    const char* want;
  } cases[] = {
      {"quant case-insensitively", kFiles, "q8_0", "model-Q8_0.gguf"},
      {"a whole-token match beats a substring", kFiles, "Q4_K", "model-q4_k.gguf"},
      {"by default Q4_K_M, skipping projectors", kFiles, "", "model-Q4_K_M.gguf"},
      {"else the first .gguf by name", {"z-F16.gguf", "a-Q8_0.gguf", "x.txt"}, "", "a-Q8_0.gguf"},
  };
  for (const auto& c : cases) {
    StatusOr<std::string> f = SelectGgufFile(c.files, c.quant, "o/r");
    ASSERT_TRUE(f.ok()) << c.what << ": " << f.status().message();
    EXPECT_EQ(*f, c.want) << c.what;
  }
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
