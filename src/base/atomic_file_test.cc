#include "base/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/temp_dir_test_util.h"

namespace tern {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using AtomicFileTest = TempDirTest;

TEST_F(AtomicFileTest, CommitReplacesTheFileWhole) {
  std::ofstream(Path("out.bin")) << "old contents";
  AtomicFile f(Path("out.bin"));
  ASSERT_TRUE(f.Create().ok());
  EXPECT_EQ(fs::path(f.temp_path()).parent_path(), dir_);  // same folder: rename is atomic
  ASSERT_TRUE(f.Write("new ").ok());
  EXPECT_EQ(Read(Path("out.bin")), "old contents");  // readers see the old file until Commit
  ASSERT_TRUE(f.Write("contents").ok());
  ASSERT_TRUE(f.Commit().ok());
  EXPECT_EQ(Read(Path("out.bin")), "new contents");
  EXPECT_EQ(Entries(), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(fs::status(Path("out.bin")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST_F(AtomicFileTest, DestructionOrAbortBeforeCommitLeavesNothing) {
  std::ofstream(Path("kept.bin")) << "kept";
  {
    AtomicFile f(Path("kept.bin"));
    ASSERT_TRUE(f.Create().ok());
    ASSERT_TRUE(f.Write("partial").ok());
  }
  {
    AtomicFile f(Path("new.bin"));
    ASSERT_TRUE(f.Create().ok());
    ASSERT_TRUE(f.Write("partial").ok());
    f.Abort();
    EXPECT_FALSE(f.Commit().ok());
  }
  EXPECT_EQ(Read(Path("kept.bin")), "kept");
  EXPECT_EQ(Entries(), std::vector<std::string>{"kept.bin"});
}

TEST_F(AtomicFileTest, MissingFolderIsAClearError) {
  const Status st = WriteFileAtomically(Path("no/such/dir/out.bin"), "x");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("no/such/dir/out.bin"));
}

// A file-size limit (as a full disk would) fails the write: the temp file is
// removed and an existing output keeps its old bytes. Runs in a forked child
// so the limit does not touch the test process.
TEST_F(AtomicFileTest, FileSizeLimitLeavesNoPartialOutput) {
  const std::string old_contents(1000, 'o');
  std::ofstream(Path("existing.bin")) << old_contents;
  for (const std::string name : {"existing.bin", "fresh.bin"}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      IgnoreFileSizeSignal();
      const rlimit limit{64 * 1024, 64 * 1024};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
      const std::string chunk(16 * 1024, 'n');
      AtomicFile f(Path(name));
      if (!f.Create().ok()) ::_exit(4);
      for (int i = 0; i < 16; ++i) {  // 256 KiB, past the limit
        const Status st = f.Write(chunk);
        if (!st.ok()) {
          // The message names the file and the cause (EFBIG).
          const bool named = st.message().find(name) != std::string::npos &&
                             st.message().find("too large") != std::string::npos;
          ::_exit(named ? 0 : 5);
        }
      }
      ::_exit(f.Commit().ok() ? 6 : 7);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << name;
  }
  EXPECT_EQ(Read(Path("existing.bin")), old_contents);
  EXPECT_EQ(Entries(), std::vector<std::string>{"existing.bin"});  // no fresh.bin, no temp
}

}  // namespace
}  // namespace tern
