// tern tokenize / tern detokenize: text -> token ids and back with a model's
// (or a vocabulary-only GGUF file's) tokenizer.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace tern {
namespace {

int Fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "tern %s: %s\n", command, message.c_str());
  return 1;
}

StatusOr<std::string> ResolveModelPath(const std::string& model) {
  if (!model.empty()) return model;
  const std::string fallback = DefaultModelPath();
  if (FileExists(fallback)) return fallback;
  return NotFound("no model given and the default " + fallback +
                  " does not exist; pass one with -m MODEL.gguf");
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model) {
  TERN_ASSIGN_OR_RETURN(std::string path, ResolveModelPath(model));
  if (!FileExists(path)) return NotFound(path + ": no such file");
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  return Tokenizer::FromGguf(*file);
}

// Reads a whole file (or standard input for "-") byte for byte.
StatusOr<std::string> ReadInput(const std::string& path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(path + ": cannot open");
  ss << f.rdbuf();
  if (f.bad()) return DataLoss(path + ": read error");
  return ss.str();
}

// Token text with control bytes escaped so each token stays on one line.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += (char)c;
    }
  }
  return out;
}

StatusOr<int32_t> ParseTokenId(const std::string& text, int32_t vocab_size) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    return InvalidArgument("bad token id '" + text + "' (expected an integer)");
  }
  if (x < 0 || x >= vocab_size) {
    return OutOfRange("token id " + text + " is outside the vocabulary of " +
                      std::to_string(vocab_size) + " tokens");
  }
  return (int32_t)x;
}

}  // namespace

int RunTokenize(int argc, char** argv) {
  std::string model, file;
  std::vector<std::string> prompts;
  bool ids_only = false, no_bos = false, parse_special = false;
  ArgParser parser(
      "tokenize [-m MODEL] (-p TEXT | -f FILE) [--ids] [--no-bos] [--parse-special]",
      "Prints the token ids of a text under a model's tokenizer: one 'id<TAB>token' line "
      "per token (the token's vocabulary text, control bytes escaped), or with --ids all "
      "ids on one line separated by spaces. BOS is added when the model asks for it.");
  AddModelFlag(parser, &model,
                   "GGUF model or vocabulary file (default: stories260K.gguf in the models "
                   "directory, when present)");
  parser.AddList("-p,--prompt", "TEXT", &prompts, "the text to tokenize");
  parser.AddString("-f,--file", "FILE", &file,
                   "tokenize this file's bytes exactly as stored ('-' = standard input)");
  parser.AddFlag("--ids", &ids_only, "print only the ids, space-separated on one line");
  parser.AddFlag("--no-bos", &no_bos, "do not add BOS (and EOS) even if the model asks");
  parser.AddFlag("--parse-special", &parse_special,
                 "recognise control-token texts such as <s> in the input (default: plain "
                 "text)");
  if (int rc = ParseOrExit(parser, argc, argv, "tokenize"); rc >= 0) return rc;

  if (prompts.size() > 1) return Fail("tokenize", "-p given more than once");
  if (!prompts.empty() && !file.empty()) return Fail("tokenize", "give either -p or -f, not both");
  if (prompts.empty() && file.empty()) {
    return Fail("tokenize", "no input: pass -p TEXT or -f FILE (see 'tern tokenize --help')");
  }
  std::string text;
  if (!file.empty()) {
    StatusOr<std::string> data = ReadInput(file);
    if (!data.ok()) return Fail("tokenize", data.status().message());
    text = std::move(*data);
  } else {
    text = prompts[0];
  }
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(model);
  if (!tokenizer.ok()) return Fail("tokenize", tokenizer.status().message());
  const Tokenizer& tok = **tokenizer;

  const std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/!no_bos, parse_special);
  std::string out;
  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += '\n';
  } else {
    for (int32_t id : ids) {
      out += std::to_string(id);
      out += '\t';
      out += Printable(tok.TokenText(id));
      out += '\n';
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int RunDetokenize(int argc, char** argv) {
  std::string model;
  std::vector<std::string> id_args;
  bool skip_special = false;
  ArgParser parser(
      "detokenize [-m MODEL] [--skip-special] ID...",
      "Prints the text of a sequence of token ids, followed by one newline. Without ID "
      "arguments the ids are read from standard input (separated by whitespace). "
      "Control tokens print as their text (e.g. <s>) unless --skip-special; the leading "
      "space a SentencePiece vocabulary adds to the first word is removed.");
  AddModelFlag(parser, &model,
                   "GGUF model or vocabulary file (default: stories260K.gguf in the models "
                   "directory, when present)");
  parser.AddFlag("--skip-special", &skip_special, "omit control tokens such as <s> and </s>");
  parser.SetPositional("ID", &id_args, "token ids");
  if (int rc = ParseOrExit(parser, argc, argv, "detokenize"); rc >= 0) return rc;

  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(model);
  if (!tokenizer.ok()) return Fail("detokenize", tokenizer.status().message());
  const Tokenizer& tok = **tokenizer;
  if (id_args.empty()) {
    std::string word;
    while (std::cin >> word) id_args.push_back(word);
  }
  std::vector<int32_t> ids;
  for (const std::string& arg : id_args) {
    StatusOr<int32_t> id = ParseTokenId(arg, tok.vocab_size());
    if (!id.ok()) return Fail("detokenize", id.status().message());
    ids.push_back(*id);
  }
  std::string text = tok.Decode(ids, skip_special);
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace tern
