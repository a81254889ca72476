#include "hub/sha256.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tern::hub {
namespace {

// FIPS 180-2 test vectors.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, FileMatchesBufferAcrossReadChunks) {
  std::string data(3 * (1 << 20) + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = (char)(i * 131 + 7);
  std::string path = (std::filesystem::temp_directory_path() / "tern_sha_XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path, std::ios::binary).write(data.data(), (std::streamsize)data.size());
  StatusOr<std::string> from_file = Sha256File(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  EXPECT_EQ(*from_file, Sha256Hex(data));
}

TEST(Sha256Test, MissingFileNamesIt) {
  StatusOr<std::string> r = Sha256File("/nonexistent/tern/x.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/tern/x.gguf"), std::string::npos);
}

TEST(Sha256Test, IsSha256Hex) {
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("abc")));
  EXPECT_FALSE(IsSha256Hex("abc"));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + "g"));
}

}  // namespace
}  // namespace tern::hub
