// Rng: the per-request random number generator of sampling, xoshiro256**
// seeded through splitmix64. Defined bit for bit here (no std:: distributions,
// whose output differs between standard libraries), so the same seed gives the
// same tokens on every platform.
//
// Thread rules: a value type; one owner at a time.
#pragma once

#include <cstdint>

namespace tern {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : state_) s = SplitMix64(x);
  }

  // Next 64 random bits.
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform double in [0, 1) with 53 random bits.
  double Uniform() { return (double)(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  // Advances x and returns the next splitmix64 output.
  static uint64_t SplitMix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  uint64_t state_[4];
};

}  // namespace tern
