#include "kernels/workspace.h"

namespace tern::kernels {

void WorkerScratch::Grow(ScratchBuf buf, size_t bytes) { bufs_[(int)buf].resize(bytes); }

int64_t WorkerScratch::BytesHeld() const {
  int64_t bytes = 0;
  for (const AlignedVector<uint8_t>& b : bufs_) bytes += (int64_t)b.size();
  return bytes;
}

void Workspace::Reserve(int num_slots) {
  while ((int)slots_.size() < num_slots) slots_.push_back(std::make_unique<WorkerScratch>());
}

AlignedVector<uint8_t>& Workspace::Activations(const ActFormat* format) {
  for (ActBuffer& b : act_) {
    if (b.format == nullptr) b.format = format;
    if (b.format == format) return b.bytes;
  }
  CHECK(false && "more activation formats than Workspace::kMaxActFormats");
  return act_[0].bytes;
}

int64_t Workspace::BytesHeld() const {
  int64_t bytes = 0;
  for (const std::unique_ptr<WorkerScratch>& s : slots_) bytes += s->BytesHeld();
  for (const ActBuffer& b : act_) bytes += (int64_t)b.bytes.size();
  return bytes;
}

}  // namespace tern::kernels
