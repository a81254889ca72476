#include "tools/kv_eviction_flags.h"

namespace tern {

StreamingKvConfig KvEvictionFlags::ToConfig() const {
  StreamingKvConfig c;
  c.sink_tokens = (int32_t)sink_tokens;
  c.window_tokens = (int32_t)window;
  return c;
}

Status CheckKvEvictionMode(const std::string& mode) {
  if (mode == "none" || mode == "streaming") return Status::Ok();
  return InvalidArgument("--kv-eviction must be none or streaming, got '" + mode + "'");
}

void AddKvEvictionFlags(ArgParser& p, KvEvictionFlags* f, const std::string& none_help,
                        const std::string& streaming_help, const std::string& window_default) {
  p.AddString("--kv-eviction", "MODE", &f->mode,
              "none: " + none_help + "; streaming: " + streaming_help + " (default none)");
  p.AddInt("--kv-sink-tokens", "S", &f->sink_tokens,
           "with --kv-eviction streaming: first tokens always kept (default 4; 0 = none)");
  p.AddInt("--kv-window", "W", &f->window,
           "with --kv-eviction streaming: recent tokens kept at an eviction (default: " +
               window_default + ")");
  p.AddCheck([f] { return CheckKvEvictionMode(f->mode); });
}

}  // namespace tern
