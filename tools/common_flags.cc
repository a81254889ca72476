#include "tools/common_flags.h"

#include <cstdio>
#include <memory>

#include "base/cpu_cores.h"
#include "tools/hf_flag.h"

namespace tern {

void AddModelFlag(ArgParser& parser, std::string* path, const std::string& help) {
  parser.AddString("-m,--model", "PATH", path, help);
  // `tern serve model.gguf`: a lone argument is the model, unless the
  // command takes positionals of its own (SetPositional wins).
  parser.SetLonePositionalFlag("-m");
  AddHfRepoFlag(parser, path);
}

namespace {

// Upper bound on -t: far past any machine, and below where starting the
// threads would fail.
constexpr int64_t kMaxThreads = 1024;
// The -t cell holds this until the flag is given.
constexpr int64_t kThreadsAbsent = INT64_MIN;

std::string ThreadsHelp() {
  return "compute threads, 1-" + std::to_string(kMaxThreads) +
         " (default: the cores available to this process, here " +
         std::to_string(AvailableCores()) +
         ": physical cores in its CPU affinity, capped by its cgroup CPU quota)";
}

// Validates a given -t; above the available cores it warns (threads then
// share cores: allowed, but rarely faster).
Status CheckThreads(int64_t n) {
  const int cores = AvailableCores();
  if (n < 1 || n > kMaxThreads) {
    return InvalidArgument("-t/--threads must be between 1 and " + std::to_string(kMaxThreads) +
                           ", got " + std::to_string(n) + " (leave -t out for the default: " +
                           std::to_string(cores) + ", the cores available to this process)");
  }
  if (n > cores) {
    std::fprintf(stderr,
                 "tern: -t %lld is more than the %d cores available to this process; threads "
                 "will share cores\n",
                 (long long)n, cores);
  }
  return Status::Ok();
}

// The parser writes -t into a cell that the check owns (the parser keeps
// the check, so the cell lives as long as the parser); the check copies a
// valid value to *threads, which keeps its 0 ("default") when -t is absent.
template <class T>
void AddThreads(ArgParser& parser, T* threads) {
  auto given = std::make_shared<int64_t>(kThreadsAbsent);
  parser.AddInt("-t,--threads", "N", given.get(), ThreadsHelp());
  parser.AddCheck([given, threads]() -> Status {
    if (*given == kThreadsAbsent) return Status::Ok();
    TERN_RETURN_IF_ERROR(CheckThreads(*given));
    *threads = (T)*given;
    return Status::Ok();
  });
}

}  // namespace

void AddThreadsFlag(ArgParser& parser, int* threads) { AddThreads(parser, threads); }

void AddThreadsFlag(ArgParser& parser, int64_t* threads) { AddThreads(parser, threads); }

}  // namespace tern
