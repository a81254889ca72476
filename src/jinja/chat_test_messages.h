// Conversations shared by the chat-template tests (chat_template_test.cc,
// family_templates_test.cc): the same messages rendered by every template.
#pragma once

#include <vector>

#include "jinja/chat_template.h"

namespace tern::testdata {

inline const std::vector<ChatMessage> kWithSystem = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello"},
    {"assistant", " Hi there! "},
    {"user", "What is 2+2?"},
};
inline const std::vector<ChatMessage> kNoSystem = {
    {"user", "Hello"},
    {"assistant", " Hi there! "},
    {"user", "What is 2+2?"},
};

}  // namespace tern::testdata
