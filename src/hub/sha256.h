// SHA-256 (OpenSSL's libcrypto) of a file or a buffer, as 64 lower-case hex
// digits: how the hub names an LFS file's content.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tern::hub {

std::string Sha256Hex(std::string_view data);
// Reads the whole file; errors name it.
StatusOr<std::string> Sha256File(const std::string& path);
// Whether text is 64 hex digits (either case).
bool IsSha256Hex(std::string_view text);

}  // namespace tern::hub
