// The kernel tables' registry (table_list.h), the x86 and scalar tables'
// getters, and the active table (chosen at start-up by SelectKernelTable).
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/table_list.h"
#include "kernels/x86/avx2_kernels.h"

namespace tern::kernels {

#define TERN_DECLARE_KERNEL_TABLE(name, getter) const KernelTable* getter();
TERN_KERNEL_TABLES(TERN_DECLARE_KERNEL_TABLE)
#undef TERN_DECLARE_KERNEL_TABLE

namespace {

KernelTable MakeRefTable() {
  KernelTable t;
  FillRefKernels(&t);
  return t;
}

// The reference table overwritten by an ISA's Fill function; nullptr when
// the CPU lacks the ISA. One static table per Fill.
template <void (*Fill)(KernelTable*)>
const KernelTable* MakeSimdTable(bool available) {
  if (!available) return nullptr;
  static KernelTable t = [] {
    KernelTable table;
    FillRefKernels(&table);
    Fill(&table);
    return table;
  }();
  return &t;
}

#define TERN_KERNEL_TABLE_ENTRY(name, getter) {name, getter},
constexpr KernelTableEntry kTables[] = {TERN_KERNEL_TABLES(TERN_KERNEL_TABLE_ENTRY)};
#undef TERN_KERNEL_TABLE_ENTRY

const KernelTableEntry* FindEntry(std::string_view name) {
  for (const KernelTableEntry& e : kTables) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

std::string TableNames() {
  std::string names;
  for (const KernelTableEntry& e : kTables) names += std::string(names.empty() ? "" : ", ") + e.name;
  return names;
}

}  // namespace

const KernelTable& RefKernelTable() {
  static const KernelTable t = MakeRefTable();
  return t;
}

const KernelTable* ScalarKernelTable() { return &RefKernelTable(); }

const KernelTable* Avx2KernelTable() {
  static const KernelTable* t =
      MakeSimdTable<FillAvx2Kernels>(DetectCpuFeatures().HasAvx2Fma());
  return t;
}

const KernelTable* Avx512VnniKernelTable() {
  static const KernelTable* t =
      MakeSimdTable<FillAvx512VnniKernels>(DetectCpuFeatures().HasAvx512Vnni());
  return t;
}

const KernelTable* AmxKernelTable() {
  static const KernelTable* t =
      MakeSimdTable<FillAmxKernels>(DetectCpuFeatures().HasAmxInt8() && EnableAmx());
  return t;
}

std::span<const KernelTableEntry> KernelTables() { return kTables; }

std::vector<const KernelTable*> AvailableKernelTables() {
  std::vector<const KernelTable*> tables;
  for (const KernelTableEntry& e : kTables) {
    if (const KernelTable* t = e.get()) tables.push_back(t);
  }
  return tables;
}

const KernelTable& ChooseKernelTable(std::string_view cap) {
  const KernelTableEntry* from = FindEntry(cap);
  for (const KernelTableEntry* e = from != nullptr ? from : kTables; e != std::end(kTables); ++e) {
    if (const KernelTable* t = e->get()) return *t;
  }
  return RefKernelTable();
}

namespace {
// The table SelectKernelTable chose; nullptr until it (or the first kernel
// call, with no cap) runs.
std::atomic<const KernelTable*> g_active{nullptr};
}  // namespace

const KernelTable& SelectKernelTable(std::string_view cap) {
  const KernelTable& t = ChooseKernelTable(cap);
  if (cap.empty()) {
    TERN_LOG_DEBUG("kernels: %s table", t.isa);
  } else if (FindEntry(cap) == nullptr) {
    TERN_LOG_WARN("TERN_ISA=%.*s names no kernel table (%s); using %s", (int)cap.size(),
                  cap.data(), TableNames().c_str(), t.isa);
  } else {
    TERN_LOG_DEBUG("kernels: %s table (TERN_ISA=%.*s)", t.isa, (int)cap.size(), cap.data());
  }
  g_active.store(&t, std::memory_order_release);
  return t;
}

const KernelTable& ActiveKernelTable() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t != nullptr) return *t;
  // Nothing selected (a test binary, a library user): the best table. Racing
  // first calls all store the same table.
  const KernelTable& best = ChooseKernelTable("");
  g_active.store(&best, std::memory_order_release);
  return best;
}

}  // namespace tern::kernels
