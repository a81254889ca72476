// The registry of kernel tables, best first: X(name, getter) per table,
// getter a `const KernelTable* getter()` (defined in the table's folder or
// tables.cc) that returns nullptr where this CPU cannot run the table, name
// its TERN_ISA value and isa. ChooseKernelTable takes the first table the
// CPU runs, from the one TERN_ISA names. A new table registers with one line
// here; its folder holds everything else.
#pragma once

#define TERN_KERNEL_TABLES(X)            \
  X("amx", AmxKernelTable)               \
  X("avx512vnni", Avx512VnniKernelTable) \
  X("avx2", Avx2KernelTable)             \
  X("portable", PortableKernelTable)     \
  X("scalar", ScalarKernelTable)
