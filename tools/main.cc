// tern: one binary, many subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"generate", tern::RunGenerate, "generate text from a prompt (greedy or sampled)"},
    {"serve", tern::RunServe, "OpenAI-compatible HTTP server"},
    {"batch", tern::RunBatch, "offline batch generation from a JSONL file"},
    {"inspect", tern::RunInspect, "show a GGUF file's metadata, tensors and KV cost"},
    {"tokenize", tern::RunTokenize, "text -> token ids with the model's tokenizer"},
    {"detokenize", tern::RunDetokenize, "token ids -> text"},
    {"perplexity", tern::RunPerplexity, "perplexity (and KL vs a base) on a text file"},
    {"bench", tern::RunBench, "prompt/decode speed against the machine's roofline; 'bench serve' loads a server"},
    {"model", tern::RunModel, "model tools: 'tern model synth' makes random-weight GGUFs"},
    {"kv-calc", tern::RunKvCalc, "KV-cache capacity planner"},
    {"quantize", tern::RunQuantize, "requantize a GGUF file to another weight format"},
    {"imatrix", tern::RunImatrix, "importance matrix from calibration text, for tern quantize --imatrix"},
    {"eval-quant", tern::RunEvalQuant, "regression check of a quantized model against its base"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "tern — a fast CPU LLM inference engine for GGUF models\n\n"
               "usage: tern <command> [options]   (tern <command> --help for details)\n\n"
               "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 1;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "tern: unknown command '%s'\n\n", name.c_str());
  PrintUsage(stderr);
  return 1;
}
