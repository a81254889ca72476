// Entry points of the `tern` subcommands. Each takes the arguments after the
// subcommand name and returns the process exit code.
#pragma once

namespace tern {

int RunInspect(int argc, char** argv);      // tools/inspect_command.cc
int RunTokenize(int argc, char** argv);     // tools/tokenize_command.cc
int RunDetokenize(int argc, char** argv);   // tools/tokenize_command.cc
int RunGenerate(int argc, char** argv);     // tools/generate_command.cc
int RunChat(int argc, char** argv);         // tools/chat_command.cc
int RunPerplexity(int argc, char** argv);   // tools/perplexity_command.cc
int RunBench(int argc, char** argv);        // tools/bench_command.cc
int RunBenchServe(int argc, char** argv);   // tools/bench_serve_command.cc
int RunBenchGrammar(int argc, char** argv); // tools/bench_grammar_command.cc
int RunModel(int argc, char** argv);        // tools/model_command.cc (synth)
int RunKvCalc(int argc, char** argv);       // tools/kv_calc_command.cc
int RunBatch(int argc, char** argv);        // tools/batch_command.cc
int RunServe(int argc, char** argv);        // tools/serve_command.cc
int RunQuantize(int argc, char** argv);     // tools/quantize_command.cc
int RunImatrix(int argc, char** argv);      // tools/imatrix_command.cc
int RunEvalQuant(int argc, char** argv);    // tools/eval_quant_command.cc
int RunVersion(int argc, char** argv);      // tools/version_command.cc
int RunPull(int argc, char** argv);         // tools/pull_command.cc
int RunDoctor(int argc, char** argv);       // tools/doctor_command.cc

}  // namespace tern
