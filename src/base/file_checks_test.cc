#include "base/file_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/temp_dir_test_util.h"

namespace tern {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using FileChecksTest = TempDirTest;

TEST_F(FileChecksTest, ReadableFileMustExistAndNotBeAFolder) {
  std::ofstream(Path("a.txt")) << "x";
  EXPECT_TRUE(CheckReadableFile(Path("a.txt"), "-f").ok());
  const Status missing = CheckReadableFile(Path("missing.txt"), "-f");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("-f " + Path("missing.txt")));
  EXPECT_THAT(CheckReadableFile(dir_.string(), "-f").message(), HasSubstr("is a folder"));
}

TEST_F(FileChecksTest, WritableFileProbesTheFolderAndLeavesNothingBehind) {
  EXPECT_TRUE(CheckWritableFile(Path("out.gguf"), "OUT").ok());
  EXPECT_EQ(Entries().size(), 0u);  // the probe is removed
  EXPECT_FALSE(fs::exists(Path("out.gguf")));

  const Status no_folder = CheckWritableFile(Path("nope/out.gguf"), "OUT");
  EXPECT_FALSE(no_folder.ok());
  EXPECT_THAT(no_folder.message(), HasSubstr("folder " + Path("nope") + " does not exist"));

  std::ofstream(Path("file")) << "x";
  EXPECT_THAT(CheckWritableFile(Path("file/out.gguf"), "OUT").message(),
              HasSubstr("is not a folder"));
  EXPECT_THAT(CheckWritableFile(dir_.string(), "OUT").message(), HasSubstr("is a folder"));
}

TEST_F(FileChecksTest, ReadOnlyFolderIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  fs::create_directories(Path("ro"));
  fs::permissions(Path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
  const Status st = CheckWritableFile(Path("ro/out.gguf"), "OUT");
  fs::permissions(Path("ro"), fs::perms::owner_all);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("cannot create a file in folder"));
}

TEST_F(FileChecksTest, SameFileSeesThroughLinks) {
  std::ofstream(Path("a")) << "x";
  std::ofstream(Path("b")) << "x";
  fs::create_symlink(Path("a"), Path("link"));
  EXPECT_TRUE(SameFile(Path("a"), Path("link")));
  EXPECT_TRUE(SameFile(Path("a"), dir_.string() + "/./a"));
  EXPECT_FALSE(SameFile(Path("a"), Path("b")));
  EXPECT_FALSE(SameFile(Path("a"), Path("missing")));
}

}  // namespace
}  // namespace tern
