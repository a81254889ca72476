// Robustness of GgufFile against corrupt and truncated input. Every test here
// has "Robust" in its name: the Makefile's asan-test target runs them under
// AddressSanitizer + UndefinedBehaviorSanitizer, where any out-of-bounds read,
// overflow or huge allocation fails the run.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "base/paths.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_test_bytes.h"

namespace tern::gguf {
namespace {

using testing::TinyFile;

Status OpenStatus(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::FromBuffer(bytes, "tiny.gguf");
  return f.ok() ? Status::Ok() : f.status();
}

// Expects a DataLoss (or other given code) error whose message has `needle`.
void ExpectError(const std::vector<uint8_t>& bytes, const std::string& needle,
                 StatusCode code = StatusCode::kDataLoss) {
  const Status st = OpenStatus(bytes);
  ASSERT_FALSE(st.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  EXPECT_EQ(st.message().rfind("tiny.gguf: ", 0), 0u) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
}

// The header of a v3 file with no tensors and `n_kv` keys (to be appended).
testing::GgufBytes KeysOnlyHeader(uint64_t n_kv) {
  testing::GgufBytes b;
  b.Put<uint32_t>(kGgufMagic);
  b.Put<uint32_t>(3);
  b.Put<uint64_t>(0);
  b.Put<uint64_t>(n_kv);
  return b;
}

TEST(GgufRobustTest, TinyFileIsValid) {
  TinyFile t;
  auto f = GgufFile::FromBuffer(t.bytes(), "tiny.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ((*f)->tensors().size(), 2u);
  EXPECT_EQ((*f)->data_offset(), t.data_at);
  EXPECT_EQ((*f)->tensors()[1].num_bytes, 34u);
  float x;
  std::memcpy(&x, (*f)->tensors()[0].data + 4, 4);
  EXPECT_EQ(x, 1.0f);
}

TEST(GgufRobustTest, RejectsBadMagic) {
  TinyFile t;
  t.bytes()[0] = 'X';
  ExpectError(t.bytes(), "not a GGUF file");
  ExpectError({}, "not a GGUF file");
  ExpectError({'G', 'G'}, "not a GGUF file");
}

TEST(GgufRobustTest, RejectsTruncatedHeader) {
  TinyFile t;
  t.bytes().resize(10);
  ExpectError(t.bytes(), "truncated");
}

// One field of TinyFile overwritten: a uint32 field or a uint64 one.
struct Patch {
  size_t TinyFile::*at;
  uint64_t value;
  bool is_u64;
};
Patch U32(size_t TinyFile::*at, uint32_t value) { return {at, value, false}; }
Patch U64(size_t TinyFile::*at, uint64_t value) { return {at, value, true}; }

struct Corruption {
  std::vector<Patch> patches;
  std::string needle;
  StatusCode code = StatusCode::kDataLoss;
};

std::vector<uint8_t> Patched(const std::vector<Patch>& patches) {
  TinyFile t;
  for (const Patch& p : patches) {
    if (p.is_u64) {
      t.b.Set<uint64_t>(t.*p.at, p.value);
    } else {
      t.b.Set<uint32_t>(t.*p.at, static_cast<uint32_t>(p.value));
    }
  }
  return t.bytes();
}

TEST(GgufRobustTest, RejectsCorruptFieldsWithTheReason) {
  TinyFile tiny;
  const std::string size = std::to_string(tiny.bytes().size());
  const std::vector<Corruption> cases = {
      {{U32(&TinyFile::version_at, 1)}, "version 1 is not supported", StatusCode::kUnimplemented},
      {{U32(&TinyFile::version_at, 0x03000000)}, "big-endian", StatusCode::kUnimplemented},
      {{U32(&TinyFile::version_at, 77)}, "unknown GGUF version 77"},
      {{U64(&TinyFile::name_len_at, 1000000)},
       "key 'general.name': string length 1000000 extends past end of file"},
      {{U64(&TinyFile::a_name_len_at, ~uint64_t{0})}, "tensor #0: name length"},
      {{U32(&TinyFile::alignment_type_at, 13)},
       "key 'general.alignment': unknown value type 13 at offset " +
           std::to_string(tiny.alignment_type_at)},
      {{U32(&TinyFile::array_type_at, 0xFFFFFFFF)}, "unknown array element type 4294967295"},
      {{U32(&TinyFile::a_dtype_at, 99)}, "tensor 'a': unknown tensor type 99"},
      {{U32(&TinyFile::a_ndims_at, 0)}, "n_dims 0"},
      {{U32(&TinyFile::a_ndims_at, 5)}, "n_dims 5"},
      {{U64(&TinyFile::a_dim1_at, 0)}, "dimension 1 is 0"},
      {{U64(&TinyFile::a_dim1_at, ~uint64_t{0})}, "must be positive"},
      // 2^40 x 2^40 elements overflows int64.
      {{U64(&TinyFile::a_dim0_at, uint64_t{1} << 40), U64(&TinyFile::a_dim1_at, uint64_t{1} << 40)},
       "overflows"},
      // Q8_0 rows must be multiples of 32.
      {{U32(&TinyFile::a_dtype_at, 8)}, "row length 4 is not a multiple of the Q8_0 block size 32"},
      {{U64(&TinyFile::b_offset_at, 4096)},
       "tensor 'b': data [offset " + std::to_string(tiny.data_at + 4096) +
           ", 34 bytes] extends past end of file (size " + size + ")"},
      // Aligned, but offset + size overflows.
      {{U64(&TinyFile::b_offset_at, ~uint64_t{0} - 31)}, "extends past end of file"},
      {{U64(&TinyFile::b_offset_at, 36)},
       "tensor 'b': data offset 36 is not a multiple of the alignment 32"},
      {{U32(&TinyFile::alignment_value_at, 48)},
       "key 'general.alignment': 48 is not a power of two"},
      {{U32(&TinyFile::alignment_value_at, 0)}, "0 is not a power of two"},
      // int32: the spec wants uint32.
      {{U32(&TinyFile::alignment_type_at, 5)}, "must be uint32"},
  };
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.needle);
    ExpectError(Patched(c.patches), c.needle, c.code);
  }
  EXPECT_TRUE(OpenStatus(Patched({U32(&TinyFile::version_at, 2)})).ok());
}

TEST(GgufRobustTest, RejectsHugeCountsWithoutAllocating) {
  for (size_t TinyFile::*at :
       {&TinyFile::tensor_count_at, &TinyFile::kv_count_at, &TinyFile::array_count_at}) {
    ExpectError(Patched({U64(at, uint64_t{1} << 60)}), "1152921504606846976");
    ExpectError(Patched({U64(at, ~uint64_t{0})}), "18446744073709551615");
  }
}

TEST(GgufRobustTest, RejectsCutTensorData) {
  TinyFile t;
  t.bytes().resize(t.bytes().size() - 32);  // cut the last tensor's tail
  ExpectError(t.bytes(), "tensor 'b'");
}

TEST(GgufRobustTest, RejectsDuplicates) {
  TinyFile t;  // rename tensor "b" to "a"
  t.bytes()[t.b_name_len_at + 8] = 'a';
  ExpectError(t.bytes(), "tensor 'a': duplicate tensor name");
  // Two keys with the same name.
  testing::GgufBytes b = KeysOnlyHeader(2);
  for (int i = 0; i < 2; ++i) {
    b.PutString("general.name");
    b.Put<uint32_t>(8);
    b.PutString("x");
  }
  ExpectError(b.bytes(), "key 'general.name': duplicate key");
}

TEST(GgufRobustTest, LimitsArrayNesting) {
  auto nested = [](int depth) {
    testing::GgufBytes b = KeysOnlyHeader(1);
    b.PutString("deep");
    b.Put<uint32_t>(9);
    for (int i = 0; i < depth - 1; ++i) {
      b.Put<uint32_t>(9);
      b.Put<uint64_t>(1);
    }
    b.Put<uint32_t>(0);  // innermost: uint8 x 1
    b.Put<uint64_t>(1);
    b.Put<uint8_t>(42);
    return b.bytes();
  };
  auto ok = GgufFile::FromBuffer(nested(kMaxArrayDepth), "tiny.gguf");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  const Value* v = (*ok)->Find("deep");
  for (int i = 0; i < kMaxArrayDepth; ++i) {
    ASSERT_EQ(v->type, ValueType::kArray);
    ASSERT_EQ(v->array.size(), 1u);
    v = &v->array[0];
  }
  EXPECT_EQ(v->u, 42u);
  ExpectError(nested(kMaxArrayDepth + 1), "nested deeper");
  ExpectError(nested(100000), "nested deeper");
}

TEST(GgufRobustTest, RejectsInvalidBool) {
  testing::GgufBytes b = KeysOnlyHeader(1);
  b.PutString("flag");
  b.Put<uint32_t>(7);
  b.Put<uint8_t>(2);
  ExpectError(b.bytes(), "key 'flag': bool byte 2");
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// On success every tensor's bytes must lie inside the file image.
void CheckOpened(const StatusOr<std::unique_ptr<GgufFile>>& f, size_t size) {
  if (!f.ok()) {
    ASSERT_FALSE(f.status().message().empty());
    return;
  }
  const std::span<const uint8_t> bytes = (*f)->bytes();
  ASSERT_EQ(bytes.size(), size);
  for (const TensorInfo& t : (*f)->tensors()) {
    ASSERT_GE(t.data, bytes.data());
    ASSERT_LE(t.num_bytes, size);
    ASSERT_LE(static_cast<size_t>(t.data - bytes.data()), size - t.num_bytes) << t.name;
  }
}

// (a) Every truncation of stories260K.gguf opens with an error (or, for the
// full length, succeeds). To stay fast under sanitizers it tries every prefix
// length up to the data section start + 4096 (all of the header, metadata and
// tensor directory), then every 4096th length, plus every tensor's end - 1,
// end and end + 1.
TEST(GgufRobustTest, EveryTruncationOfStories260KFailsCleanly) {
  const std::string path = DefaultModelPath();
  if (!FileExists(path)) GTEST_SKIP() << "test model missing: " << path;
  const std::vector<uint8_t> bytes = ReadAll(path);
  auto full = GgufFile::FromBuffer(bytes, "stories260K.gguf");
  ASSERT_TRUE(full.ok()) << full.status().message();

  std::set<size_t> lengths;
  const size_t dense_end = std::min(bytes.size(), (*full)->data_offset() + 4096);
  for (size_t n = 0; n <= dense_end; ++n) lengths.insert(n);
  for (size_t n = 0; n <= bytes.size(); n += 4096) lengths.insert(n);
  for (const TensorInfo& t : (*full)->tensors()) {
    const size_t end = (*full)->data_offset() + t.offset + t.num_bytes;
    for (size_t n : {end - 1, end, end + 1}) {
      if (n <= bytes.size()) lengths.insert(n);
    }
  }
  lengths.insert(bytes.size());

  size_t num_ok = 0;
  for (size_t n : lengths) {
    auto f = GgufFile::FromBuffer(std::span(bytes.data(), n), "stories260K.gguf");
    CheckOpened(f, n);
    if (f.ok()) ++num_ok;
    if (n < bytes.size()) {
      EXPECT_FALSE(f.ok()) << "prefix of " << n << " bytes opened";
    }
    if (!f.ok()) {
      ASSERT_EQ(f.status().message().find('\n'), std::string::npos);
      ASSERT_EQ(f.status().message().rfind("stories260K.gguf: ", 0), 0u) << f.status().message();
    }
  }
  EXPECT_EQ(num_ok, 1u);  // only the whole file (the last tensor ends at EOF)
  EXPECT_GT(lengths.size(), 10000u);
}

// (b) Seeded random flips of 1-4 bytes inside the header, metadata and tensor
// directory: each image opens with an error or succeeds, and on success all
// tensor data lies inside the buffer. Returns how many images opened.
int FlipBytesAndOpen(const std::string& path, int num_trials, uint64_t seed) {
  std::vector<uint8_t> bytes = ReadAll(path);
  auto full = GgufFile::FromBuffer(bytes, "flipped.gguf");
  EXPECT_TRUE(full.ok()) << full.status().message();
  if (!full.ok()) return 0;
  const size_t region = (*full)->data_offset();

  std::mt19937_64 rng(seed);
  int num_ok = 0;
  for (int trial = 0; trial < num_trials; ++trial) {
    const int num_flips = 1 + static_cast<int>(rng() % 4);
    std::vector<std::pair<size_t, uint8_t>> saved;
    for (int k = 0; k < num_flips; ++k) {
      const size_t at = rng() % region;
      saved.emplace_back(at, bytes[at]);
      // Half the time a single-bit flip, otherwise a random byte.
      bytes[at] = (rng() & 1) ? bytes[at] ^ static_cast<uint8_t>(1u << (rng() % 8))
                              : static_cast<uint8_t>(rng());
    }
    auto f = GgufFile::FromBuffer(bytes, "flipped.gguf");
    CheckOpened(f, bytes.size());
    num_ok += f.ok();
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) bytes[it->first] = it->second;
  }
  return num_ok;
}

TEST(GgufRobustTest, RandomByteFlipsInStories260KHeaderFailCleanlyOrOpen) {
  const std::string path = DefaultModelPath();
  if (!FileExists(path)) GTEST_SKIP() << "test model missing: " << path;
  constexpr int kTrials = 2000;
  const int num_ok = FlipBytesAndOpen(path, kTrials, 20261129);
  // Flips inside token strings or scores leave a valid file; others do not.
  EXPECT_GT(num_ok, 0);
  EXPECT_LT(num_ok, kTrials);
}

// The same on a file mixing Q4_0, Q8_0 and F16 tensors (block-size checks).
TEST(GgufRobustTest, RandomByteFlipsInQuantizedHeaderFailCleanlyOrOpen) {
  const std::string path = ModelsDir() + "/quantized/stories260K-Q4_0.gguf";
  if (!FileExists(path)) GTEST_SKIP() << "test model missing: " << path;
  constexpr int kTrials = 2000;
  const int num_ok = FlipBytesAndOpen(path, kTrials, 7);
  EXPECT_GT(num_ok, 0);
  EXPECT_LT(num_ok, kTrials);
}

}  // namespace
}  // namespace tern::gguf
