#include "io/multi_root.h"

#include <fmt/format.h>

namespace aq::io {
namespace {

// Counts the bytes read through it towards its root.
class CountingFile final : public RandomAccessFile {
 public:
  CountingFile(std::unique_ptr<RandomAccessFile> f, std::atomic<uint64_t>* bytes) : f_(std::move(f)), bytes_(bytes) {}
  Result<size_t> ReadAt(uint64_t offset, size_t n, void* buf) const override {
    size_t got = AQ_TRY(f_->ReadAt(offset, n, buf));
    bytes_->fetch_add(got, std::memory_order_relaxed);
    return got;
  }
  uint64_t size() const override { return f_->size(); }
  // Errors name the physical path (the mount that failed).
  const std::string& path() const override { return f_->path(); }
  int native_fd() const override { return f_->native_fd(); }

 private:
  std::unique_ptr<RandomAccessFile> f_;
  std::atomic<uint64_t>* bytes_;
};

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

Status ReadOnly(const std::string& path) {
  return Status(StatusCode::kPermissionDenied, fmt::format("'{}': a multi-root data path is read-only", path));
}

}  // namespace

Result<RootPolicy> ParseRootPolicy(std::string_view s) {
  if (s == "spread") return RootPolicy::kSpread;
  if (s == "pinned") return RootPolicy::kPinned;
  return InvalidArgument(fmt::format("unknown root policy '{}' (expected spread or pinned)", s));
}

Result<std::vector<std::string>> SplitRoots(std::string_view spec) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    // A URL root (aquifer://HOST:PORT/...) has colons of its own: the
    // separator is the first ':' after its authority.
    size_t from = pos;
    size_t scheme = spec.find("://", pos);
    if (scheme != std::string_view::npos && spec.find(':', pos) == scheme) {
      size_t slash = spec.find('/', scheme + 3);
      from = slash == std::string_view::npos ? spec.size() : slash;
    }
    size_t colon = spec.find(':', from);
    std::string part(spec.substr(pos, colon == std::string_view::npos ? std::string_view::npos : colon - pos));
    while (part.size() > 1 && part.back() == '/') part.pop_back();
    if (part.empty()) return InvalidArgument(fmt::format("empty root in data path '{}'", spec));
    out.push_back(std::move(part));
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  return out;
}

MultiRootFileSystem::MultiRootFileSystem(FileSystem& base, std::vector<std::string> roots, RootPolicy policy,
                                         uint32_t rank)
    : base_(base),
      roots_(std::move(roots)),
      policy_(policy),
      rank_(rank),
      counters_(std::make_unique<Counters[]>(roots_.size())) {}

size_t MultiRootFileSystem::RootOf(const std::string& path) const {
  if (roots_.size() <= 1) return 0;
  if (policy_ == RootPolicy::kPinned) return rank_ % roots_.size();
  const std::string& r0 = roots_[0];
  std::string_view rel = path.compare(0, r0.size(), r0) == 0 ? std::string_view(path).substr(r0.size()) : path;
  return Fnv1a(rel) % roots_.size();
}

Result<std::unique_ptr<RandomAccessFile>> MultiRootFileSystem::OpenRead(const std::string& path, AccessHint hint) {
  const std::string& r0 = roots_[0];
  size_t root = RootOf(path);
  std::string physical = path;
  if (root != 0 && path.compare(0, r0.size(), r0) == 0) physical = roots_[root] + path.substr(r0.size());
  auto f = AQ_TRY(base_.OpenRead(physical, hint));
  counters_[root].opens.fetch_add(1, std::memory_order_relaxed);
  return std::unique_ptr<RandomAccessFile>(std::make_unique<CountingFile>(std::move(f), &counters_[root].bytes));
}

Result<size_t> MultiRootFileSystem::Plan(const std::string& stream, const std::vector<PlannedRead>& reads) {
  const std::string& r0 = roots_[0];
  std::vector<PlannedRead> physical = reads;
  for (auto& r : physical) {
    const size_t root = RootOf(r.path);
    if (root != 0 && r.path.compare(0, r0.size(), r0) == 0) r.path = roots_[root] + r.path.substr(r0.size());
  }
  return base_.Plan(stream, physical);
}

Result<std::unique_ptr<WritableFile>> MultiRootFileSystem::OpenWrite(const std::string& path) { return ReadOnly(path); }
Status MultiRootFileSystem::MakeDirs(const std::string& path) { return ReadOnly(path); }
Status MultiRootFileSystem::Remove(const std::string& path) { return ReadOnly(path); }
Status MultiRootFileSystem::Rename(const std::string& from, const std::string&) { return ReadOnly(from); }

Status MultiRootFileSystem::DropCache(const std::string& path) {
  const std::string& r0 = roots_[0];
  for (const auto& root : roots_) {
    std::string physical = path.compare(0, r0.size(), r0) == 0 ? root + path.substr(r0.size()) : path;
    AQ_TRY(base_.DropCache(physical));
  }
  return Status::Ok();
}

}  // namespace aq::io
