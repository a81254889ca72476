// ArgParser: the flag parser every `tern` subcommand uses, so that all of them
// accept `--flag value`, `--flag=value`, short aliases (-m) and `--help`, and
// reject unknown flags with a clear message.
//
// Other tools' habits, for every command alike: '_' reads as '-' in long
// flags (--max_model_len), the spellings of tools/flag_aliases.h are
// accepted, pointed to or ignored with a warning, and an unknown flag gets
// "did you mean" the closest of the command's flags (edit distance).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/progress.h"  // FormatBytes
#include "base/status.h"

namespace tern {

class ArgParser {
 public:
  // usage: one line after "usage: tern ", e.g. "generate -m MODEL -p PROMPT".
  // description: a paragraph shown by --help.
  ArgParser(std::string usage, std::string description);

  // names: "-m,--model". metavar shown in help ("PATH"). help text should say
  // the default.
  void AddString(const std::string& names, const std::string& metavar,
                 std::string* out, const std::string& help);
  void AddInt(const std::string& names, const std::string& metavar, int64_t* out,
              const std::string& help);
  void AddInt(const std::string& names, const std::string& metavar, int* out,
              const std::string& help);
  void AddDouble(const std::string& names, const std::string& metavar, double* out,
                 const std::string& help);
  void AddFlag(const std::string& names, bool* out, const std::string& help);
  // A flag that may be repeated; each value appended.
  void AddList(const std::string& names, const std::string& metavar,
               std::vector<std::string>* out, const std::string& help);
  // Positional arguments are collected here (none allowed when not set).
  void SetPositional(const std::string& metavar, std::vector<std::string>* out,
                     const std::string& help);
  // A lone positional argument is taken as the value of the flag `name`
  // ("-m") when the command takes no positionals (SetPositional not called):
  // `tern serve model.gguf`. Giving both is an error.
  void SetLonePositionalFlag(const std::string& name);
  // A check run after a successful Parse (not with --help), in the order
  // added: validation and resolution that needs several flags' values.
  void AddCheck(std::function<Status()> check);

  // Parses argv[0..argc) (the arguments after the subcommand name).
  // Returns an error naming the offending flag. Sets help_requested() on
  // -h/--help.
  Status Parse(int argc, char** argv);
  bool help_requested() const { return help_requested_; }
  // Notes from the last Parse for stderr (ignored GPU flags).
  const std::vector<std::string>& warnings() const { return warnings_; }
  std::string Help() const;

 private:
  struct Option {
    std::vector<std::string> names;
    std::string metavar;  // empty for a boolean flag
    std::string help;
    std::function<Status(const std::string&)> set;
  };
  const Option* FindOption(const std::string& name) const;
  // The option an unknown name stands for (underscores, alias table), or an
  // error with suggestions. *ignored_takes_value is set (and nullptr
  // returned) for a flag accepted with no effect.
  StatusOr<const Option*> ResolveUnknown(const std::string& name, bool* ignored,
                                         bool* ignored_takes_value);
  std::string Suggest(const std::string& name) const;
  Status TakeLonePositional(const std::string& value, const std::vector<const Option*>& seen);
  void Add(const std::string& names, const std::string& metavar, const std::string& help,
           std::function<Status(const std::string&)> set);

  std::string usage_;
  std::string description_;
  std::vector<Option> options_;
  std::vector<std::string>* positional_ = nullptr;
  std::string positional_metavar_;
  std::string positional_help_;
  std::string lone_positional_flag_;
  std::vector<std::function<Status()>> checks_;
  std::vector<std::string> warnings_;
  bool help_requested_ = false;
};

// Parses "2GiB", "512MiB", "1.5GB", "4096" (bytes) into bytes.
// Optimal-string-alignment edit distance (insertions, deletions,
// substitutions, adjacent transpositions), for "did you mean".
int EditDistance(const std::string& a, const std::string& b);

StatusOr<int64_t> ParseByteSize(const std::string& text);

// Standard handling at the top of a command: parses, prints warnings, help
// (exit 0) or the error plus a hint (exit 1). Returns -1 when the command
// should go on.
int ParseOrExit(ArgParser& parser, int argc, char** argv, const char* command);

}  // namespace tern
