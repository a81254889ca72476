// Cheap checks a command runs on its file arguments before any expensive work
// (loading a model, tokenizing, evaluating, converting tensors), so a typo or
// an unwritable folder fails in milliseconds instead of after the run.
//
// Messages name the flag or role (`what`, e.g. "--save-logits") and the path.
// Thread rules: pure functions of the file system; any thread.
#pragma once

#include <string>

#include "base/status.h"

namespace tern {

// path exists, is not a folder, and opens for reading.
Status CheckReadableFile(const std::string& path, const std::string& what);

// path can be written: it is not a folder, and a file can be created beside it
// (probed by creating and removing "<path>.tmp-XXXXXX", the temp file an
// atomic writer such as gguf::GgufWriter uses, so it also holds for root and
// for read-only mounts); an existing path must be writable.
Status CheckWritableFile(const std::string& path, const std::string& what);

// Both name the same existing file (also through links); false when either is
// missing.
bool SameFile(const std::string& a, const std::string& b);

}  // namespace tern
