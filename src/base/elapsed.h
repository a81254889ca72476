// Seconds elapsed on the steady clock since a time point: the stopwatch the
// tools' timings share.
#pragma once

#include <chrono>

namespace tern {

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace tern
