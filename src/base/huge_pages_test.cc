#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace tern {
namespace {

TEST(HugePageBufferTest, AlignedZeroedWritableAndMovable) {
  for (bool huge : {true, false}) {
    const size_t bytes = (size_t{3} << 20) + 123;
    HugePageBuffer a(bytes, huge);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(a.size(), bytes);
    EXPECT_EQ((uintptr_t)a.data() % (uintptr_t{2} << 20), 0u);
    EXPECT_EQ(a.data()[0], 0);
    EXPECT_EQ(a.data()[bytes - 1], 0);
    a.data()[bytes - 1] = 7;
    HugePageBuffer b = std::move(a);
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(b.data()[bytes - 1], 7);
  }
  HugePageBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
}

}  // namespace
}  // namespace tern
