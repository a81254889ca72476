// tern --version (-V, `tern version`): what this binary is and what it runs
// on: version, git commit and build (from CMake at configure time), the kernel
// tables compiled in and the one this CPU gets (kernels/kernel_table.h).
#include <cstdio>
#include <string>

#include "base/env_settings.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"

#ifndef TERN_VERSION
#define TERN_VERSION "unknown"
#endif
#ifndef TERN_GIT_COMMIT
#define TERN_GIT_COMMIT "unknown"
#endif
#ifndef TERN_BUILD_TYPE
#define TERN_BUILD_TYPE "unknown"
#endif
#ifndef TERN_COMPILER
#define TERN_COMPILER "unknown"
#endif

namespace tern {
namespace {

std::string VersionText() {
  namespace k = kernels;
  const k::CpuFeatures cpu = k::DetectCpuFeatures();
  // Every registered table is compiled into every build (x86 SIMD files
  // carry their own target flags); whether the CPU can run one is known at
  // run time.
  std::string compiled, usable;
  for (const k::KernelTableEntry& t : k::KernelTables()) {
    compiled += std::string(compiled.empty() ? "" : " ") + t.name;
    if (t.get() != nullptr) usable += std::string(usable.empty() ? "" : " ") + t.name;
  }
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  char features[160];
  std::snprintf(features, sizeof(features), "AVX2+FMA+F16C %s, AVX-512 VNNI %s, AMX-INT8 %s",
                yes(cpu.HasAvx2Fma()), yes(cpu.HasAvx512Vnni()), yes(cpu.HasAmxInt8()));
  const std::string cap = EnvSettings::FromProcess().isa;
  std::string active = k::ActiveIsa();
  if (!cap.empty()) active += " (capped by TERN_ISA=" + cap + ")";
  return std::string("tern ") + TERN_VERSION + "\n" +
         "commit:    " + TERN_GIT_COMMIT + "\n" +
         "build:     " + TERN_BUILD_TYPE + ", " + TERN_COMPILER + ", C++" +
         std::to_string(__cplusplus / 100 % 100) + "\n" +
         "kernels:   " + compiled + " (compiled in)\n" +
         "this CPU:  " + features + "; can run " + usable + "\n" +
         "active:    " + active + "\n";
}

}  // namespace

int RunVersion(int argc, char** argv) {
  ArgParser parser("--version   (also: tern -V, tern version)",
                   "Prints the version, git commit, build type, compiler, the kernel tables "
                   "compiled in and the one this CPU gets.");
  if (int rc = ParseOrExit(parser, argc, argv, "version"); rc >= 0) return rc;
  std::fputs(VersionText().c_str(), stdout);
  return 0;
}

}  // namespace tern
