// Helpers for end-to-end tests of the `tern` binary: run it through the shell
// with stdin text, capture stdout, stderr and the exit code.
//
// The binary is $TERN_BINARY (ctest sets it); tests GTEST_SKIP when
// TernBinary() is empty. Arguments are pasted into a shell command line as
// given: quoting is the caller's job (ShellQuote helps). Not thread-safe
// beyond what std::system is.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "base/paths.h"

namespace tern::testing {

struct CliResult {
  int exit_code = -1;  // 128 + signal number when killed by a signal
  std::string out, err;
};

inline std::string TernBinary() {
  const char* bin = std::getenv("TERN_BINARY");
  return bin ? bin : "";
}

// 'text' with embedded single quotes escaped, safe for /bin/sh.
inline std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline bool WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tern_cli_XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Number of '\n'-terminated lines (a last unterminated line counts too).
inline int CountLines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  if (!text.empty() && text.back() != '\n') ++n;
  return n;
}

// Runs "$TERN_BINARY <args>" with stdin_text on stdin.
inline CliResult RunTern(const std::string& args, const std::string& stdin_text = "") {
  CliResult result;
  const std::string bin = TernBinary();
  if (bin.empty()) {
    result.err = "TERN_BINARY is not set\n";
    return result;
  }
  TempDir dir;
  if (dir.path().empty() || !WriteFileBytes(dir.File("stdin"), stdin_text)) {
    result.err = "cannot create temporary files\n";
    return result;
  }
  const std::string cmd = ShellQuote(bin) + " " + args + " <" + ShellQuote(dir.File("stdin")) + " >" +
                          ShellQuote(dir.File("stdout")) + " 2>" + ShellQuote(dir.File("stderr"));
  const int status = std::system(cmd.c_str());
  if (status != -1 && WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (status != -1 && WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  result.out = ReadFileBytes(dir.File("stdout"));
  result.err = ReadFileBytes(dir.File("stderr"));
  return result;
}

}  // namespace tern::testing

// Guards at the top of a test: skip when ctest did not name the binary, or
// when the shared test model (../shared/models) is absent.
#define SKIP_WITHOUT_BINARY()                  \
  if (::tern::testing::TernBinary().empty()) \
  GTEST_SKIP() << "TERN_BINARY not set (run through ctest)"

#define SKIP_WITHOUT_MODEL()                              \
  SKIP_WITHOUT_BINARY();                                  \
  if (!::tern::FileExists(::tern::DefaultModelPath()))   \
  GTEST_SKIP() << "test model missing: " << ::tern::DefaultModelPath()
