// tern imatrix: an importance matrix from calibration text. Runs the model
// over the text in windows exactly as `tern perplexity` does (the same
// PerplexityEvaluator: tokenize, windows of --ctx tokens, BOS first) with a
// MatMulObserver attached that feeds every weight MatMul's input rows to a
// quant::ImatrixAccumulator, then saves the per-column mean of x^2 as a GGUF
// file for `tern quantize --imatrix` (format in quant/imatrix.h). The text
// file and the output folder are checked before the model loads.
#include <cstdio>
#include <memory>
#include <string>

#include "base/file_checks.h"
#include "base/progress.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "quant/imatrix.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/text_run.h"

namespace tern {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern imatrix: %s\n", message.c_str());
  return 1;
}

// Feeds the model's MatMul inputs to the accumulator; keeps the first error
// (OnMatMul cannot return one).
class ImatrixObserver : public MatMulObserver {
 public:
  explicit ImatrixObserver(quant::ImatrixAccumulator& acc) : acc_(acc) {}
  void OnMatMul(const std::string& weight_name, const float* x, int64_t num_tokens,
                int64_t cols) override {
    if (!status_.ok()) return;
    status_ = acc_.Add(weight_name, x, num_tokens, cols);
  }
  const Status& status() const { return status_; }

 private:
  quant::ImatrixAccumulator& acc_;
  Status status_;
};

struct ImatrixArgs {
  std::string model;
  TextRunFlags text;  // -f, -c, --chunks, -t
  std::string out;
};

}  // namespace

int RunImatrix(int argc, char** argv) {
  ImatrixArgs a;
  ArgParser p("imatrix -m MODEL -f CALIB.txt -o FILE [--ctx N] [--chunks N] [-t N]",
              "Runs MODEL over the calibration text in windows of --ctx tokens (BOS first, as "
              "'tern perplexity') and writes, per weight matrix, the mean square of each input "
              "column as '<weight>.imatrix' F32 tensors of a GGUF FILE, for "
              "'tern quantize --imatrix FILE'.");
  AddModelFlag(p, &a.model, "GGUF model (required)");
  AddTextRunFlags(p, &a.text, "calibration text file (required)");
  p.AddString("-o,--output", "FILE", &a.out, "imatrix GGUF file to write (required)");
  AddThreadsFlag(p, &a.text.threads);
  if (int rc = ParseOrExit(p, argc, argv, "imatrix"); rc >= 0) return rc;
  if (a.model.empty()) return Fail("no model given: pass one with -m MODEL.gguf");
  if (Status st = CheckTextRunFlags(a.text, "calibration text"); !st.ok()) return Fail(st.message());
  if (a.out.empty()) return Fail("no output given: pass the file to write with -o FILE");

  if (Status st = CheckReadableFile(a.text.text_file, "calibration text"); !st.ok()) {
    return Fail(st.message());
  }
  if (SameFile(a.out, a.model)) return Fail("output " + a.out + " is the model file; write the imatrix elsewhere");
  if (Status st = CheckWritableFile(a.out, "output"); !st.ok()) return Fail(st.message());

  auto model_or = Model::Load(a.model);
  if (!model_or.ok()) return Fail(model_or.status().message());
  std::unique_ptr<Model> model = std::move(model_or).value();

  PerplexityOptions options;
  options.ctx = (int32_t)a.text.ctx;
  options.batch = options.ctx;
  auto run_or = PrepareTextRun("imatrix", *model, a.text.text_file, options, a.text.threads, a.text.max_chunks);
  if (!run_or.ok()) return Fail(run_or.status().message());
  PerplexityRun& run = *run_or;
  PerplexityEvaluator& ev = *run.evaluator;
  const int32_t num_chunks = run.num_chunks;

  quant::ImatrixAccumulator acc;
  ImatrixObserver observer(acc);
  model->SetMatMulObserver(&observer);
  Progress progress("imatrix", "chunks", num_chunks);
  auto detail = [&] {
    char text[64];
    std::snprintf(text, sizeof text, "ppl %.4f, %d weights observed", ev.Perplexity(),
                  acc.num_weights());
    return std::string(text);
  };
  while (ev.chunks_done() < num_chunks) {
    const Status st = ev.RunNextChunk();
    if (!st.ok()) return Fail(st.message());
    if (!observer.status().ok()) return Fail(observer.status().message());
    progress.Update(ev.chunks_done(), detail());
  }
  model->SetMatMulObserver(nullptr);
  progress.Finish(detail());
  if (acc.num_weights() == 0) {
    return Fail("the model reported no weight MatMul to observe; nothing to write");
  }
  if (Status st = acc.Save(a.out, a.text.text_file, num_chunks); !st.ok()) return Fail(st.message());
  std::fprintf(stdout, "wrote %s: %d weights, %d chunks of %d tokens\n", a.out.c_str(),
               acc.num_weights(), num_chunks, options.ctx);
  return 0;
}

}  // namespace tern
