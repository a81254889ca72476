// tern: one binary, many subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "base/atomic_file.h"
#include "base/env_settings.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"generate", tern::RunGenerate, "generate text from a prompt (greedy or sampled)"},
    {"chat", tern::RunChat, "chat with the model in the terminal (its chat template, prefix cache)"},
    {"serve", tern::RunServe, "OpenAI-compatible HTTP server"},
    {"batch", tern::RunBatch, "offline batch generation from a JSONL file"},
    {"inspect", tern::RunInspect, "show a GGUF file's metadata, tensors and KV cost"},
    {"tokenize", tern::RunTokenize, "text -> token ids with the model's tokenizer"},
    {"detokenize", tern::RunDetokenize, "token ids -> text"},
    {"perplexity", tern::RunPerplexity, "perplexity (and KL vs a base) on a text file"},
    {"bench", tern::RunBench, "prompt/decode speed against the machine's roofline; 'bench serve' loads a server"},
    {"model", tern::RunModel, "model tools: 'tern model synth' makes random-weight GGUFs"},
    {"kv-calc", tern::RunKvCalc, "KV-cache capacity planner"},
    {"doctor", tern::RunDoctor, "measure machine, model and workload; say what limits serving and which flags to use"},
    {"quantize", tern::RunQuantize, "requantize a GGUF file to another weight format"},
    {"imatrix", tern::RunImatrix, "importance matrix from calibration text, for tern quantize --imatrix"},
    {"eval-quant", tern::RunEvalQuant, "regression check of a quantized model against its base"},
    {"version", tern::RunVersion, "version, git commit, build and the CPU kernels in use (also --version, -V)"},
    {"pull", tern::RunPull, "download a GGUF model from the Hugging Face hub into the cache"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "tern — a fast CPU LLM inference engine for GGUF models\n\n"
               "usage: tern <command> [options]   (tern <command> --help for details)\n"
               "       tern --version             (version, commit, build, CPU kernels)\n\n"
               "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nA lone argument is the model where a command takes no other: "
               "'tern serve model.gguf'.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Past RLIMIT_FSIZE a write fails (EFBIG) and the atomic writers remove
  // their temp files, instead of SIGXFSZ killing the process mid-write.
  tern::IgnoreFileSizeSignal();
  // The environment's settings, read and logged once; each command copies
  // the rest into its config objects (flags win).
  const tern::EnvSettings env = tern::EnvSettings::FromProcess();
  if (env.pool_spin_us >= 0) tern::ThreadPool::SetMaxSpinMicros(env.pool_spin_us);
  // The kernel table, chosen once before anything runs a kernel (TERN_ISA
  // caps it).
  tern::kernels::SelectKernelTable(env.isa);
  if (env.weight_layout == "tiles" || env.weight_layout == "rows") {
    tern::kernels::SetWeightLayoutChoice(env.weight_layout == "tiles"
                                             ? tern::kernels::WeightLayoutChoice::kTiles
                                             : tern::kernels::WeightLayoutChoice::kRows);
  } else if (!env.weight_layout.empty() && env.weight_layout != "auto") {
    TERN_LOG_WARN("TERN_WEIGHT_LAYOUT=%s is not one of auto, tiles, rows; timing both layouts",
                  env.weight_layout.c_str());
  }
  if (argc < 2) {
    PrintUsage(stderr);
    return 1;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "-V" || name == "--version") return tern::RunVersion(argc - 2, argv + 2);
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(argc - 2, argv + 2);
  }
  std::string hint;
  int best = 3;  // edit distance at most 2
  for (const Command& c : kCommands) {
    const int d = tern::EditDistance(name, c.name);
    if (d < best) {
      best = d;
      hint = std::string("; did you mean ") + c.name + "?";
    }
  }
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) {
    hint = "; the command comes first, e.g. 'tern serve " + name + "'";
  }
  std::fprintf(stderr, "tern: unknown command '%s'%s\n\n", name.c_str(), hint.c_str());
  PrintUsage(stderr);
  return 1;
}
