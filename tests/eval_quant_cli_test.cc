// End-to-end tests of `tern eval-quant` on stories260K and its quantized
// copies in ../shared/models/quantized: Q8_0 stays close to the base, Q4_0
// drifts further, a model compared with itself shows no difference, and
// mismatched or missing inputs fail cleanly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::RunTern;
using testing::ShellQuote;

std::string TextPath() { return ModelsDir() + "/text/tinystories_sample.txt"; }
std::string Quantized(const std::string& type) {
  return ModelsDir() + "/quantized/stories260K-" + type + ".gguf";
}

class EvalQuantCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
    if (!FileExists(DefaultModelPath()) || !FileExists(TextPath()) ||
        !FileExists(Quantized("Q8_0")) || !FileExists(Quantized("Q4_0"))) {
      GTEST_SKIP() << "stories260K models or text/tinystories_sample.txt not found in "
                   << ModelsDir();
    }
  }

  // Runs eval-quant --json of quant against stories260K.gguf.
  nlohmann::json Eval(const std::string& quant) {
    const auto r = RunTern("eval-quant -m " + ShellQuote(DefaultModelPath()) + " -q " +
                           ShellQuote(quant) + " -f " + ShellQuote(TextPath()) +
                           " --ctx 128 -t 1 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
};

TEST_F(EvalQuantCliTest, Q8_0IsCloseToBase) {
  const nlohmann::json j = Eval(Quantized("Q8_0"));
  ASSERT_TRUE(j.contains("kl_mean")) << j.dump();
  for (const char* key : {"ppl_base", "ppl_quant", "delta_ppl", "kl_mean", "kl_p99",
                          "top1_agreement", "size_ratio"}) {
    EXPECT_TRUE(j.contains(key) && j[key].is_number()) << key << " in " << j.dump();
  }
  EXPECT_LT(j["kl_mean"].get<double>(), 0.01);
  EXPECT_GE(j["kl_p99"].get<double>(), 0.0);
  EXPECT_GT(j["top1_agreement"].get<double>(), 0.9);
  EXPECT_NEAR(j["delta_ppl"].get<double>(),
              j["ppl_quant"].get<double>() - j["ppl_base"].get<double>(), 1e-9);
  EXPECT_NEAR(j["size_ratio"].get<double>(), 379168.0 / 1185376.0, 1e-6);
  // llama.cpp's perplexity tool: 6.8464 at -c 128 on this text.
  EXPECT_NEAR(j["ppl_base"].get<double>(), 6.8464, 0.01);
}

TEST_F(EvalQuantCliTest, Q4_0DriftsFurtherThanQ8_0) {
  const nlohmann::json q8 = Eval(Quantized("Q8_0"));
  const nlohmann::json q4 = Eval(Quantized("Q4_0"));
  ASSERT_TRUE(q8.contains("kl_mean") && q4.contains("kl_mean"));
  EXPECT_GT(q4["kl_mean"].get<double>(), q8["kl_mean"].get<double>());
  EXPECT_LT(q4["size_ratio"].get<double>(), q8["size_ratio"].get<double>());
}

TEST_F(EvalQuantCliTest, ModelAgainstItselfShowsNoDifference) {
  const nlohmann::json j = Eval(DefaultModelPath());
  ASSERT_TRUE(j.contains("kl_mean")) << j.dump();
  EXPECT_NEAR(j["kl_mean"].get<double>(), 0.0, 1e-9);
  EXPECT_EQ(j["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(j["delta_ppl"].get<double>(), 0.0);
  EXPECT_EQ(j["size_ratio"].get<double>(), 1.0);
}

TEST_F(EvalQuantCliTest, TextOutputNamesEachFigure) {
  const auto r = RunTern("eval-quant -m " + ShellQuote(DefaultModelPath()) + " -q " +
                         ShellQuote(Quantized("Q8_0")) + " -f " + ShellQuote(TextPath()) +
                         " --ctx 128 --chunks 2 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* word : {"ppl", "delta ppl", "kl mean", "kl p99", "top-1 agreement", "size ratio"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << " in " << r.out;
  }
}

TEST_F(EvalQuantCliTest, DifferentVocabularyOrMissingArgumentsFail) {
  const std::string other = ModelsDir() + "/llama-2-tiny-random.gguf";
  if (FileExists(other)) {
    const auto r = RunTern("eval-quant -m " + ShellQuote(DefaultModelPath()) + " -q " +
                           ShellQuote(other) + " -f " + ShellQuote(TextPath()) + " --ctx 128");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not the same model"), std::string::npos) << r.err;
    EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;
  }
  const auto no_quant = RunTern("eval-quant -m " + ShellQuote(DefaultModelPath()) + " -f " +
                                ShellQuote(TextPath()));
  EXPECT_EQ(no_quant.exit_code, 1);
  EXPECT_NE(no_quant.err.find("-q"), std::string::npos) << no_quant.err;
}

}  // namespace
}  // namespace tern
