// The settings a process takes from environment variables, read in one
// place when a command starts (not deep inside the engine or the KV cache),
// copied into the config objects (EngineConfig) where a command-line flag, if
// given, wins, and logged once:
//   TERN_STEP_LOG=FILE    one JSON line per engine step (--step-log FILE)
//   TERN_POOL_SPIN=US     how long pool threads spin before they block
//                         (ThreadPool::SetMaxSpinMicros, applied by main)
//   TERN_ISA=NAME         caps the kernel table (kernels::SelectKernelTable,
//                         applied by main)
//   TERN_WEIGHT_LAYOUT=tiles|rows  where the faster weight layout depends
//                         on the CPU, always the kernels' tiles / the file's
//                         rows instead of timing both at load
//                         (kernels::SetWeightLayoutChoice, applied by main)
//   TERN_KV_HUGEPAGES=0   4 KiB pages for the KV cache instead of 2 MiB
//                         (EngineConfig::kv_huge_pages -> KvShape::huge_pages)
//   TERN_MODELS_DIR=DIR   where the shared models are (base/paths.h's
//                         ModelsDir, DefaultModelPath); not logged
// HF_* and TERN_CACHE are read by hub/hub_config.h's
// HubConfig::FromEnvironment, the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tern {

struct EnvSettings {
  std::string step_log_path;  // "" = none
  int64_t pool_spin_us = -1;  // -1 = the pool's default

  // TERN_ISA: the kernel table to start the choice from ("" = the best this
  // CPU runs; kernel_table.h's ChooseKernelTable).
  std::string isa;
  // TERN_WEIGHT_LAYOUT: "tiles", "rows", or "" (time both; kernels.h's
  // WeightLayoutChoice). Other values are kept for main to reject.
  std::string weight_layout;

  // Memory and paths.
  bool kv_huge_pages = true;  // TERN_KV_HUGEPAGES=0: false
  std::string models_dir;     // TERN_MODELS_DIR; "" = the built-in default

  std::vector<std::string> found;  // "NAME=value" of each variable set (the log line)

  // getenv is a parameter so that tests can feed their own variables.
  static EnvSettings Read(const std::function<const char*(const char*)>& getenv);
  // Read(std::getenv) once per process (later calls return the same
  // values); that first call logs the variables found (one info line, none
  // when nothing is set).
  static EnvSettings FromProcess();
};

}  // namespace tern
