#include "store/block_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/buffer.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/units.h"

namespace aq::store {
namespace {

// Aligned buffers for O_DIRECT reads, kept for the next read (a few, of
// the largest size asked for) instead of freed: a fresh multi-MiB buffer
// costs a page fault per 4 KiB on every block read.
class AlignedBuffers {
 public:
  struct Give {
    size_t capacity = 0;
    void operator()(char* p) const { Return(p, capacity); }
  };
  using Buffer = std::unique_ptr<char, Give>;
  static Buffer Take(size_t len) {
    {
      std::lock_guard<std::mutex> lock(mu());
      auto& f = kept();
      for (size_t i = 0; i < f.size(); ++i) {
        if (f[i].second >= len) {
          auto [p, cap] = f[i];
          f.erase(f.begin() + static_cast<std::ptrdiff_t>(i));
          return Buffer(p, Give{cap});
        }
      }
    }
    return Buffer(static_cast<char*>(std::aligned_alloc(4096, len)), Give{len});
  }

 private:
  static constexpr size_t kKept = 8;
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::pair<char*, size_t>>& kept() {
    static auto* f = new std::vector<std::pair<char*, size_t>>();  // never destroyed: used until exit
    return *f;
  }
  static void Return(char* p, size_t capacity) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu());
    auto& f = kept();
    if (f.size() < kKept) {
      f.emplace_back(p, capacity);
      return;
    }
    // Full: keep the larger of this one and the smallest kept.
    auto smallest = std::min_element(f.begin(), f.end(), [](auto& a, auto& b) { return a.second < b.second; });
    if (smallest->second < capacity) {
      std::free(smallest->first);
      *smallest = {p, capacity};
    } else {
      std::free(p);
    }
  }
};

// This thread's CPU time: what the codecs cost, apart from waiting for a
// core (a node's readers decompress concurrently).
double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A random id (32 hex digits) or a content id (64).
bool IsBlockId(std::string_view s) { return (s.size() == 32 || s.size() == 64) && IsLowerHex(s); }

}  // namespace

std::string ContentId(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    id[2 * i] = kHex[digest[i] >> 4];
    id[2 * i + 1] = kHex[digest[i] & 15];
  }
  return id;
}

bool IsContentId(std::string_view id) { return id.size() == 64 && IsLowerHex(id); }

bool BlockStore::IsSlow(const std::string& pool) const {
  for (const auto& p : pools_) {
    if (p.name == pool || (pool.empty() && &p == &pools_.front())) return p.media == Media::kHdd;
  }
  return false;
}

std::string NewBlockId() {
  thread_local std::mt19937_64 gen{std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)};
  return fmt::format("{:016x}{:016x}", gen(), gen());
}

std::string_view MediaName(Media m) { return m == Media::kHdd ? "hdd" : "ssd"; }

std::optional<Media> ParseMedia(std::string_view name) {
  if (name == "ssd") return Media::kSsd;
  if (name == "hdd") return Media::kHdd;
  return std::nullopt;
}

std::string PoolForMedia(const std::vector<std::vector<PoolConfig>>& members, Media media) {
  std::vector<std::pair<std::string, int>> count;  // in the order first seen
  for (const auto& pools : members) {
    for (const auto& p : pools) {
      if (p.media != media) continue;
      auto it = std::find_if(count.begin(), count.end(), [&](const auto& c) { return c.first == p.name; });
      if (it == count.end()) {
        count.emplace_back(p.name, 1);
      } else {
        ++it->second;
      }
    }
  }
  std::string best;
  int most = 0;
  for (const auto& [pool, k] : count) {
    if (k > most) {
      best = pool;
      most = k;
    }
  }
  return best;
}

Status PublishPools(MetaStore& meta, const std::vector<PoolConfig>& pools) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : pools) {
    a.push_back({{"name", p.name},
                 {"media", MediaName(p.media)},
                 {"path", p.path},
                 {"compress", p.compression.ToString()},
                 {"min_saving", p.compression.min_saving},
                 {"dedup", p.dedup}});
  }
  return meta.PutSetting(kNodePoolsSetting, a.dump());
}

Result<std::vector<PoolConfig>> PublishedPools(MetaStore& meta) {
  auto text = meta.GetSetting(kNodePoolsSetting);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::vector<PoolConfig>();
    return text.status();
  }
  auto a = nlohmann::json::parse(*text, nullptr, false);
  if (!a.is_array()) return Corruption(fmt::format("setting {}: not a JSON array", kNodePoolsSetting));
  std::vector<PoolConfig> out;
  for (const auto& e : a) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
    PoolConfig p;
    p.name = e["name"].get<std::string>();
    p.path = e.value("path", "");
    p.media = ParseMedia(e.value("media", "ssd")).value_or(Media::kSsd);
    if (e.contains("compress") && e["compress"].is_string()) {
      if (auto c = ParseCompression(e["compress"].get<std::string>()); c.ok()) p.compression = *c;
    }
    if (e.contains("min_saving") && e["min_saving"].is_number()) {
      p.compression.min_saving = std::clamp(e["min_saving"].get<double>(), 0.0, 0.99);
    }
    p.dedup = e.contains("dedup") && e["dedup"].is_boolean() && e["dedup"].get<bool>();
    out.push_back(std::move(p));
  }
  return out;
}

Result<PoolConfig> ParsePool(std::string_view spec) {
  PoolConfig p;
  size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument(fmt::format("pool '{}': expected NAME=PATH[,media=ssd|hdd]", spec));
  }
  p.name = std::string(spec.substr(0, eq));
  std::string_view rest = spec.substr(eq + 1);
  size_t comma = rest.find(',');
  p.path = std::string(rest.substr(0, comma));
  if (p.path.empty()) return InvalidArgument(fmt::format("pool '{}': no path", spec));
  while (comma != std::string_view::npos) {
    rest = rest.substr(comma + 1);
    comma = rest.find(',');
    std::string_view opt = rest.substr(0, comma);
    if (opt.rfind("media=", 0) == 0) {
      auto m = ParseMedia(opt.substr(6));
      if (!m) return InvalidArgument(fmt::format("pool '{}': media '{}' (expected ssd or hdd)", spec, opt.substr(6)));
      p.media = *m;
    } else if (opt == "direct") {
      p.direct = true;
    } else if (opt.rfind("latency=", 0) == 0) {
      auto d = units::ParseDuration(opt.substr(8));
      if (!d.ok() || *d > 10) {
        return InvalidArgument(fmt::format(
            "pool '{}': latency '{}' is not a duration of at most 10 s (8ms, 500us, 0.01s)", spec, opt.substr(8)));
      }
      p.read_latency_s = *d;
    } else if (opt.rfind("spindles=", 0) == 0) {
      const std::string n(opt.substr(9));
      char* end = nullptr;
      const long v = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || end != n.c_str() + n.size() || v < 1 || v > 4096) {
        return InvalidArgument(fmt::format("pool '{}': spindles '{}' is not a count from 1 to 4096", spec, n));
      }
      p.spindles = static_cast<int>(v);
    } else if (opt.rfind("compress=", 0) == 0) {
      const double keep = p.compression.min_saving;
      auto c = ParseCompression(opt.substr(9));
      if (!c.ok()) return InvalidArgument(fmt::format("pool '{}': {}", spec, c.status().message()));
      p.compression = *c;
      p.compression.min_saving = keep;
    } else if (opt.rfind("min-saving=", 0) == 0) {
      std::string v(opt.substr(11));
      if (!v.empty() && v.back() == '%') v.pop_back();
      char* end = nullptr;
      const double pct = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(pct >= 0) || pct >= 100) {
        return InvalidArgument(
            fmt::format("pool '{}': min-saving '{}' is not a percentage from 0 to 99", spec, opt.substr(11)));
      }
      p.compression.min_saving = pct / 100;
    } else if (opt == "dedup") {
      p.dedup = true;
    } else {
      return InvalidArgument(
          fmt::format("pool '{}': unknown option '{}' (media=ssd|hdd, direct, latency=DURATION, spindles=N, "
                      "compress=lz4|zstd[:LEVEL], min-saving=PERCENT, dedup)",
                      spec, opt));
    }
  }
  if (p.spindles > 0 && p.read_latency_s <= 0) {
    return InvalidArgument(fmt::format("pool '{}': spindles= limits emulated reads: it needs latency=", spec));
  }
  return p;
}

Result<std::unique_ptr<BlockStore>> BlockStore::Open(io::FileSystem& fs, std::vector<PoolConfig> pools) {
  if (pools.empty()) return InvalidArgument("a block store needs at least one pool");
  std::set<std::string> names;
  for (const auto& p : pools) {
    if (!names.insert(p.name).second) return InvalidArgument(fmt::format("pool '{}' given twice", p.name));
    AQ_TRY(fs.MakeDirs(io::JoinPath(p.path, "blocks")));
  }
  return std::unique_ptr<BlockStore>(new BlockStore(fs, std::move(pools)));
}

BlockStore::BlockStore(io::FileSystem& fs, std::vector<PoolConfig> pools) : fs_(fs), pools_(std::move(pools)) {
  MutexLock lock(usage_mu_);
  MutexLock stats_lock(stats_mu_);
  for (const auto& p : pools_) {
    spindles_.push_back(p.spindles > 0 ? std::make_unique<std::counting_semaphore<>>(p.spindles) : nullptr);
    logical_.emplace_back();
    compression_.push_back(CompressionStats{p.name});
    dedup_.push_back(DedupStats{p.name});
  }
}

Result<const PoolConfig*> BlockStore::Pool(const std::string& name) const {
  if (name.empty()) return &pools_[0];
  for (const auto& p : pools_) {
    if (p.name == name) return &p;
  }
  return NotFound(fmt::format("no pool '{}'", name));
}

std::string BlockStore::PathOf(const BlockRef& ref) const {
  for (const auto& p : pools_) {
    if (p.name == ref.pool)
      return io::JoinPath(io::JoinPath(io::JoinPath(p.path, "blocks"), ref.id.substr(0, 2)), ref.id);
  }
  return "";
}

Result<BlockRef> BlockStore::Write(const std::string& pool_name, std::string_view data) {
  const PoolConfig* pool = AQ_TRY(Pool(pool_name));
  if (pool->dedup) return WriteShared(pool, data);
  return WriteFile(NewBlockId(), pool, data, crc32c::Value(data));
}

bool BlockStore::Has(const BlockRef& ref) const {
  if (!IsBlockId(ref.id)) return false;
  const std::string path = PathOf(ref);
  return !path.empty() && fs_.Stat(path).ok();
}

Result<BlockRef> BlockStore::WriteWithId(const std::string& id, const std::string& pool_name, std::string_view data) {
  if (!IsBlockId(id)) return InvalidArgument(fmt::format("'{}' is not a block id", id));
  const PoolConfig* pool = AQ_TRY(Pool(pool_name));
  return WriteFile(id, pool, data, crc32c::Value(data));
}

Result<BlockRef> BlockStore::WriteShared(const PoolConfig* pool, std::string_view data) {
  const size_t index = static_cast<size_t>(pool - pools_.data());
  const double t0 = ThreadCpuSeconds();
  const std::string id = ContentId(data);
  const double hash_s = ThreadCpuSeconds() - t0;
  const BlockRef ref{id, data.size(), crc32c::Value(data), pool->name};
  const std::string held = pool->name + "/" + id;
  // Held before looking: a removal of the block between finding it and the
  // caller's commit would lose it.
  MutexLock stripe(Stripe(id));
  {
    MutexLock lock(holds_mu_);
    ++holds_[held];
  }
  // Stored already: verified like any read before a new layout names it. A
  // damaged copy is replaced by these bytes (every object naming the block
  // reads the good ones from then on).
  bool damaged = false;
  if (fs_.Stat(PathOf(ref)).ok()) {
    auto found = Read(ref);
    if (found.ok()) {
      MutexLock lock(stats_mu_);
      auto& d = dedup_[index];
      ++d.found;
      d.found_bytes += data.size();
      d.hash_seconds += hash_s;
      return ref;
    }
    damaged = true;
    log::warn("dedup: stored block {} in pool '{}' failed its check ({}); writing it again", id, pool->name,
              found.status().message());
  }
  auto written = WriteFile(id, pool, data, ref.crc32c);
  if (!written.ok()) {
    Unhold({ref});
    return written.status();
  }
  MutexLock lock(stats_mu_);
  auto& d = dedup_[index];
  ++d.written;
  if (damaged) ++d.repaired;
  d.hash_seconds += hash_s;
  return written;
}

void BlockStore::Unhold(const std::vector<BlockRef>& blocks) {
  MutexLock lock(holds_mu_);
  for (const auto& b : blocks) {
    if (!IsContentId(b.id)) continue;
    auto it = holds_.find(b.pool + "/" + b.id);
    if (it != holds_.end() && --it->second <= 0) holds_.erase(it);
  }
}

Result<BlockRef> BlockStore::WriteFile(const std::string& id, const PoolConfig* pool, std::string_view data,
                                       uint32_t crc) {
  const size_t index = static_cast<size_t>(pool - pools_.data());
  BlockRef ref{id, data.size(), crc, pool->name};
  const std::string path = PathOf(ref);
  AQ_TRY(fs_.MakeDirs(std::string(io::DirName(path))));
  const double t0 = pool->compression.enabled() ? ThreadCpuSeconds() : 0;  // a system call: only when counted
  const EncodedBlock encoded = EncodeBlock(data, ref.crc32c, pool->compression);
  if (pool->compression.enabled()) {
    MutexLock lock(stats_mu_);
    auto& c = compression_[index];
    if (encoded.is_compressed()) {
      ++c.compressed;
      c.logical_in += data.size();
      c.stored_out += encoded.compressed.size();
    } else {
      ++c.plain;
    }
    c.compress_seconds += ThreadCpuSeconds() - t0;
  }
  const std::string tmp = path + ".tmp";
  Status st = [&]() -> Status {
    auto f = AQ_TRY(fs_.OpenWrite(tmp));
    AQ_TRY(f->Append(encoded.header));
    AQ_TRY(f->Append(encoded.is_compressed() ? std::string_view(encoded.compressed) : data));
    AQ_TRY(f->Sync());
    return f->Close();
  }();
  if (!st.ok()) {
    (void)fs_.Remove(tmp);  // a full disk leaves nothing half-written behind
    return st;
  }
  AQ_TRY(fs_.Rename(tmp, path));
  {
    MutexLock lock(usage_mu_);
    logical_[index][id] = KnownBlock{data.size(), encoded.is_compressed()};
  }
  return ref;
}

Result<std::string> BlockStore::Read(const BlockRef& ref, uint64_t offset, uint64_t n) {
  if (!IsBlockId(ref.id)) return InvalidArgument(fmt::format("'{}' is not a block id", ref.id));
  const PoolConfig* pool = AQ_TRY(Pool(ref.pool));
  const std::string path = PathOf(ref);
  if (pool->read_latency_s > 0) {
    auto* heads = spindles_[static_cast<size_t>(pool - pools_.data())].get();
    if (heads != nullptr) heads->acquire();
    std::this_thread::sleep_for(std::chrono::duration<double>(pool->read_latency_s));
    if (heads != nullptr) heads->release();
  }
  auto f = AQ_TRY(fs_.OpenRead(path, pool->direct ? io::AccessHint::kDirect : io::AccessHint::kSequential));
  auto corrupt = [&](const std::string& why) {
    return Status(StatusCode::kCorruption, fmt::format("block {} in pool '{}' ({}): {}", ref.id, ref.pool, path, why));
  };
  auto damaged = [&](const Status& st) { return st.code() == StatusCode::kCorruption ? corrupt(st.message()) : st; };
  const uint64_t file_size = f->size();
  // The header and the data, each read once into where it is checked; a
  // whole plain block's read returns its buffer without another copy.
  Result<std::string> block = Status::Ok();
  BlockHeader h;
  if (pool->direct) {
    // O_DIRECT wants an aligned buffer and length: the file rounded up to
    // 4 KiB into a reused aligned buffer (the kernel stops at its end), so
    // that the page faults of a fresh buffer are not paid on every block.
    const size_t len = (file_size + 4095) & ~uint64_t{4095};
    AlignedBuffers::Buffer aligned = AlignedBuffers::Take(len);
    if (!aligned) return Status(StatusCode::kIoError, fmt::format("no memory for a {} byte read of {}", len, path));
    const size_t got = AQ_TRY(f->ReadAt(0, len, aligned.get()));
    if (got != file_size) return corrupt("shorter than when opened");
    const std::string_view file(aligned.get(), file_size);
    auto parsed = ParseBlockHeader(file.substr(0, kMaxBlockHeaderBytes));
    if (!parsed.ok()) return damaged(parsed.status());
    h = *parsed;
    const std::string_view stored = file.substr(h.header_bytes);
    if (h.codec == Codec::kNone) {
      // Checked where it lies, then only the bytes asked for are copied.
      if (Status st = CheckStored(h, stored); !st.ok()) return damaged(st);
      if (h.logical_crc != ref.crc32c || h.logical_size != ref.size) {
        return corrupt(fmt::format("{} bytes with checksum {:08x}, the layout says {} bytes with {:08x}",
                                   h.logical_size, h.logical_crc, ref.size, ref.crc32c));
      }
      if (offset > stored.size()) {
        return InvalidArgument(fmt::format("offset {} past the block's {} bytes", offset, stored.size()));
      }
      return std::string(stored.substr(offset, std::min<uint64_t>(n, stored.size() - offset)));
    }
    const double t0 = ThreadCpuSeconds();  // compressed here: plain blocks returned above
    block = DecodeBlock(h, stored);
    CountDecode(h, pool, t0);
  } else {
    char head[kMaxBlockHeaderBytes];
    const size_t got = AQ_TRY(f->ReadAt(0, std::min<uint64_t>(file_size, sizeof head), head));
    auto parsed = ParseBlockHeader(std::string_view(head, got));
    if (!parsed.ok()) return damaged(parsed.status());
    h = *parsed;
    if (file_size < h.header_bytes) return corrupt("shorter than when opened");
    std::string stored = ReadBuffer(file_size - h.header_bytes);
    if (AQ_TRY(f->ReadAt(h.header_bytes, stored.size(), stored.data())) != stored.size()) {
      return corrupt("shorter than when opened");
    }
    const double t0 = h.codec != Codec::kNone ? ThreadCpuSeconds() : 0;  // a system call: only when counted
    block = DecodeBlock(h, std::move(stored));
    CountDecode(h, pool, t0);
  }
  if (!block.ok()) return damaged(block.status());
  const uint64_t size = block->size();
  if (size != ref.size) return corrupt(fmt::format("{} bytes, the layout says {}", size, ref.size));
  if (h.logical_crc != ref.crc32c) {
    return corrupt(fmt::format("data checksum {:08x}, expected {:08x}", h.logical_crc, ref.crc32c));
  }
  if (offset > size) return InvalidArgument(fmt::format("offset {} past the block's {} bytes", offset, size));
  if (offset == 0 && n >= size) return block;
  return std::string(std::string_view(*block).substr(offset, std::min<uint64_t>(n, size - offset)));
}

Result<std::optional<BlockStore::PlainFile>> BlockStore::OpenPlain(const BlockRef& ref) {
  if (!IsBlockId(ref.id)) return InvalidArgument(fmt::format("'{}' is not a block id", ref.id));
  const PoolConfig* pool = AQ_TRY(Pool(ref.pool));
  if (pool->media == Media::kHdd || pool->direct || pool->read_latency_s > 0) return std::optional<PlainFile>();
  const std::string path = PathOf(ref);
  auto f = AQ_TRY(fs_.OpenRead(path, io::AccessHint::kSequential));
  if (f->native_fd() < 0) return std::optional<PlainFile>();  // not a file of this machine's
  char head[kMaxBlockHeaderBytes];
  const size_t got = AQ_TRY(f->ReadAt(0, std::min<uint64_t>(f->size(), sizeof head), head));
  auto h = ParseBlockHeader(std::string_view(head, got));
  if (!h.ok()) {
    return Status(StatusCode::kCorruption,
                  fmt::format("block {} in pool '{}' ({}): {}", ref.id, ref.pool, path, h.status().message()));
  }
  if (h->codec != Codec::kNone || h->logical_size != ref.size || h->logical_crc != ref.crc32c ||
      f->size() != h->header_bytes + ref.size) {
    return std::optional<PlainFile>();  // compressed, or not what the reference says: Read tells which
  }
  const int fd = ::fcntl(f->native_fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return IoError(fmt::format("block {}: duplicating its descriptor: {}", path, std::strerror(errno)));
  return std::optional<PlainFile>(PlainFile{fd, h->header_bytes});
}

void BlockStore::CountDecode(const BlockHeader& h, const PoolConfig* pool, double t0) {
  if (h.codec == Codec::kNone) return;
  const double s = ThreadCpuSeconds() - t0;
  MutexLock lock(stats_mu_);
  auto& c = compression_[static_cast<size_t>(pool - pools_.data())];
  ++c.decompressed;
  c.decompress_seconds += s;
}

std::string BlockStore::StoredForm::Describe() const {
  if (header.codec == Codec::kNone) return "plain";
  return fmt::format("{}{} {:.2f}", CodecName(header.codec), header.filter == Filter::kDelta ? "+delta" : "",
                     header.logical_size > 0
                         ? static_cast<double>(header.stored_size) / static_cast<double>(header.logical_size)
                         : 1.0);
}

Result<BlockStore::StoredForm> BlockStore::Stored(const BlockRef& ref) const {
  if (!IsBlockId(ref.id)) return InvalidArgument(fmt::format("'{}' is not a block id", ref.id));
  AQ_TRY(Pool(ref.pool));
  auto f = AQ_TRY(fs_.OpenRead(PathOf(ref), io::AccessHint::kRandom));
  char head[kMaxBlockHeaderBytes];
  const size_t got = AQ_TRY(f->ReadAt(0, std::min<uint64_t>(f->size(), sizeof head), head));
  StoredForm form;
  form.header = AQ_TRY(ParseBlockHeader(std::string_view(head, got)));
  form.file_bytes = f->size();
  return form;
}

Status BlockStore::Remove(const BlockRef& ref) {
  const PoolConfig* pool = AQ_TRY(Pool(ref.pool));
  if (!IsBlockId(ref.id)) return InvalidArgument(fmt::format("'{}' is not a block id", ref.id));
  if (IsContentId(ref.id)) {
    MutexLock stripe(Stripe(ref.id));
    bool keep = false;
    {
      MutexLock lock(holds_mu_);
      keep = holds_.count(ref.pool + "/" + ref.id) > 0;
    }
    // Unknown (no metadata to ask, or it failed): kept. An orphan at worst,
    // collected at the next start.
    if (!keep) {
      auto named = referenced_ ? referenced_(ref) : Result<bool>(Unsupported("no reference check"));
      keep = !named.ok() || *named;
    }
    if (keep) {
      MutexLock lock(stats_mu_);
      ++dedup_[static_cast<size_t>(pool - pools_.data())].kept;
      return Status::Ok();
    }
    Status st = fs_.Remove(PathOf(ref));
    return st.code() == StatusCode::kNotFound ? Status::Ok() : st;
  }
  Status st = fs_.Remove(PathOf(ref));
  if (st.code() == StatusCode::kNotFound) return Status::Ok();
  return st;
}

Result<std::string> BlockStore::Quarantine(const BlockRef& ref) {
  const PoolConfig* pool = AQ_TRY(Pool(ref.pool));
  if (!IsBlockId(ref.id)) return InvalidArgument(fmt::format("'{}' is not a block id", ref.id));
  const std::string dir = io::JoinPath(pool->path, "quarantine");
  AQ_TRY(fs_.MakeDirs(dir));
  // Named by the block and the time it was set aside: a block damaged
  // twice keeps both copies.
  const int64_t now = Clock::Real().WallNanos();
  const std::string to = io::JoinPath(dir, fmt::format("{}.{}", ref.id, now));
  AQ_TRY(fs_.Rename(PathOf(ref), to));
  return to;
}

std::vector<std::pair<std::string, uint64_t>> BlockStore::Quarantined() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& p : pools_) {
    const std::string dir = io::JoinPath(p.path, "quarantine");
    auto list = fs_.List(dir);
    if (!list.ok()) continue;  // none yet
    for (const auto& e : *list) {
      if (!e.is_dir) out.emplace_back(io::JoinPath(dir, e.name), e.size);
    }
  }
  return out;
}

Status BlockStore::DropQuarantined(const std::string& path) {
  for (const auto& p : pools_) {
    if (std::string(io::DirName(path)) == io::JoinPath(p.path, "quarantine")) return fs_.Remove(path);
  }
  return InvalidArgument(fmt::format("'{}' is not in a pool's quarantine folder", path));
}

Result<GcReport> BlockStore::CollectGarbage(const std::vector<std::string>& referenced) {
  std::set<std::string> keep(referenced.begin(), referenced.end());
  GcReport r;
  for (const auto& p : pools_) {
    const std::string root = io::JoinPath(p.path, "blocks");
    for (const auto& dir : AQ_TRY(fs_.List(root))) {
      if (!dir.is_dir) continue;
      const std::string d = io::JoinPath(root, dir.name);
      for (const auto& e : AQ_TRY(fs_.List(d))) {
        if (e.is_dir) continue;
        const std::string path = io::JoinPath(d, e.name);
        const bool tmp = e.name.size() > 4 && e.name.compare(e.name.size() - 4, 4, ".tmp") == 0;
        if (!tmp) ++r.blocks_seen;
        if (tmp || (IsBlockId(e.name) && !keep.count(e.name))) {
          AQ_TRY(fs_.Remove(path));
          (tmp ? r.temporaries_removed : r.orphans_removed) += 1;
          r.bytes_freed += e.size;
        }
      }
    }
  }
  return r;
}

Result<std::vector<std::string>> BlockStore::List(const std::string& only_pool) {
  std::vector<std::string> out;
  for (const auto& p : pools_) {
    if (!only_pool.empty() && p.name != only_pool) continue;
    const std::string root = io::JoinPath(p.path, "blocks");
    for (const auto& dir : AQ_TRY(fs_.List(root))) {
      if (!dir.is_dir) continue;
      for (const auto& e : AQ_TRY(fs_.List(io::JoinPath(root, dir.name)))) {
        if (!e.is_dir && IsBlockId(e.name)) out.push_back(e.name);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<PoolUsage>> BlockStore::Usage() {
  std::vector<PoolUsage> out;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const auto& p = pools_[i];
    PoolUsage u{p.name};
    struct File {
      std::string id;
      uint64_t size;
    };
    std::vector<File> files;
    const std::string root = io::JoinPath(p.path, "blocks");
    for (const auto& dir : AQ_TRY(fs_.List(root))) {
      if (!dir.is_dir) continue;
      for (const auto& e : AQ_TRY(fs_.List(io::JoinPath(root, dir.name)))) {
        if (!e.is_dir && IsBlockId(e.name)) files.push_back({e.name, e.size});
      }
    }
    // The logical size of a file seen before is known; a new one's header
    // is read (outside the lock: a read may wait on the disk).
    std::unordered_map<std::string, KnownBlock> known;
    std::vector<size_t> unknown;
    {
      MutexLock lock(usage_mu_);
      for (size_t k = 0; k < files.size(); ++k) {
        auto it = logical_[i].find(files[k].id);
        if (it == logical_[i].end()) {
          unknown.push_back(k);
        } else {
          known.emplace(files[k].id, it->second);
        }
      }
    }
    for (size_t k : unknown) {
      const std::string path = io::JoinPath(io::JoinPath(root, files[k].id.substr(0, 2)), files[k].id);
      char head[kMaxBlockHeaderBytes];
      auto f = fs_.OpenRead(path, io::AccessHint::kRandom);
      if (!f.ok()) continue;  // removed since it was listed
      auto got = (*f)->ReadAt(0, std::min<uint64_t>((*f)->size(), sizeof head), head);
      auto h = got.ok() ? ParseBlockHeader(std::string_view(head, *got)) : Result<BlockHeader>(got.status());
      // A damaged header counts as what the file holds; the scrubber
      // reports the damage.
      known.emplace(files[k].id,
                    h.ok() ? KnownBlock{h->logical_size, h->codec != Codec::kNone} : KnownBlock{files[k].size, false});
    }
    for (const auto& file : files) {
      auto it = known.find(file.id);
      if (it == known.end()) continue;
      ++u.blocks;
      u.bytes += file.size;
      u.logical_bytes += it->second.logical;
      if (it->second.compressed) ++u.compressed_blocks;
      if (IsContentId(file.id)) ++u.shared_blocks;
    }
    {
      // Blocks removed since are forgotten; one written while the pool was
      // listed is too, and its header read next time.
      MutexLock lock(usage_mu_);
      logical_[i] = std::move(known);
    }
    out.push_back(u);
  }
  return out;
}

std::vector<CompressionStats> BlockStore::CompressionCounters() const {
  MutexLock lock(stats_mu_);
  return compression_;
}

std::vector<DedupStats> BlockStore::DedupCounters() const {
  MutexLock lock(stats_mu_);
  return dedup_;
}

}  // namespace aq::store
