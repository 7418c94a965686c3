#include "pipeline/pipeline.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/crc32c.h"
#include "common/random.h"
#include "common/thread_pool.h"
#include "format/example.h"
#include "format/manifest.h"
#include "format/recordio.h"
#include "format/tar.h"
#include "format/tfrecord.h"
#include "image/decode.h"
#include "image/jpeg_region.h"
#include "image/resize.h"
#include "io/sequential_reader.h"
#include "pipeline/catalog.h"

namespace aq::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

int64_t Nanos(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A batch buffer, 64-byte aligned. From 2 MiB up it is aligned to 2 MiB
// and marked for transparent huge pages where the kernel offers them
// (advice only): touching 150 MB of batch buffers then costs 75 page
// faults, not 37,000, which matters most in VMs where a fault costs
// microseconds.
void* AllocateBatchBuffer(size_t bytes) {
  constexpr size_t kHuge = 2u << 20;
  if (bytes < kHuge) return std::aligned_alloc(64, (bytes + 63) & ~size_t{63});
  const size_t rounded = (bytes + kHuge - 1) & ~(kHuge - 1);
  void* p = std::aligned_alloc(kHuge, rounded);
#if defined(MADV_HUGEPAGE)
  if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

// A run: consecutive read positions of one epoch whose records follow each
// other in one file, read with one sequential stream.
struct Run {
  uint32_t epoch;
  uint64_t first;  // position in the epoch's read order
  uint64_t count;
};

constexpr uint64_t kMaxRunBytes = 64ull << 20;
constexpr uint64_t kReadBufferBytes = 4ull << 20;  // per reader: one run's bytes at a time, at most
// Per worker: the decoded region, the decoder's own buffers and the
// resampler's rows. A JPEG is decoded at the DCT scale nearest its output,
// so its region is about the output's size, but a progressive JPEG keeps
// every coefficient of the image and a PNG is decoded whole: counted as a
// whole decode of the largest record at 1.5 bits per pixel or more
// (kBytesPerRecordByte per byte of it), up to 8 megapixels.
constexpr uint64_t kDecodeScratchBytes = 24ull << 20;
constexpr uint64_t kDecodeScratchBase = 2ull << 20;
constexpr uint64_t kBytesPerRecordByte = 16;

}  // namespace

struct BatchBuffer {
  std::unique_ptr<uint8_t, FreeDeleter> data;
  std::vector<int32_t> labels;
  std::vector<uint32_t> samples;
  std::vector<uint8_t> bad;
  std::vector<float> crops;  // 4 per sample
  std::vector<uint8_t> flips;
  std::vector<std::string> fields;  // fields_per_sample per sample
  std::vector<uint8_t> present;
  uint32_t filled = 0;  // samples written (under the pipeline's mutex)
};

// Every batch buffer of a pipeline. Leases share it, so a batch can be held
// after its pipeline is gone; a released buffer goes back to the free list.
struct BatchBuffers {
  size_t bytes = 0;  // per buffer, 64-byte multiple
  uint32_t batch_size = 0;
  size_t fields_per_sample = 0;
  std::mutex mu;
  std::vector<std::unique_ptr<BatchBuffer>> all;  // guarded by mu
  std::vector<BatchBuffer*> free;                 // guarded by mu
  // Storage for records in flight, by size class (eight per octave), kept
  // across the pipelines that share these buffers: a reader takes a string
  // of its record's class and the worker gives it back once the record is
  // decoded. Memory is then reused whichever thread read or decoded a
  // record; malloc keeps what a thread freed in that thread's arena, and
  // each pipeline's new threads left more of it behind.
  std::vector<std::vector<std::string>> free_records;  // guarded by mu
  uint64_t record_bytes = 0;                           // every record string made (guarded by mu)

  static size_t RecordClass(uint64_t n) {
    if (n <= 4096) return 0;
    const int o = std::bit_width(n - 1) - 1;  // 2^o < n <= 2^(o+1)
    const uint64_t step = (uint64_t{1} << o) / 8;
    const uint64_t q = (n - (uint64_t{1} << o) + step - 1) / step;  // 1..8
    return static_cast<size_t>(o - 12) * 8 + static_cast<size_t>(q);
  }
  static uint64_t ClassBytes(size_t k) {
    if (k == 0) return 4096;
    const int o = static_cast<int>((k - 1) / 8) + 12;
    const uint64_t q = (k - 1) % 8 + 1;
    return (uint64_t{1} << o) + q * ((uint64_t{1} << o) / 8);
  }
  // `out` (empty) gets room for n bytes without growing.
  void TakeRecord(uint64_t n, std::string* out) {
    const size_t k = RecordClass(n);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (k < free_records.size() && !free_records[k].empty()) {
        out->swap(free_records[k].back());
        free_records[k].pop_back();
        return;
      }
      record_bytes += ClassBytes(k);
    }
    out->reserve(static_cast<size_t>(ClassBytes(k)));
  }
  void GiveRecord(std::string&& s) {
    if (s.capacity() < 4096) return;  // never taken (a file that did not open)
    size_t k = RecordClass(s.capacity());
    if (ClassBytes(k) > s.capacity()) --k;  // not one of ours: the class it covers
    std::lock_guard<std::mutex> lock(mu);
    if (free_records.size() <= k) free_records.resize(k + 1);
    free_records[k].push_back(std::move(s));
  }
  Result<BatchBuffer*> Take() {
    std::lock_guard<std::mutex> lock(mu);
    if (!free.empty()) {
      BatchBuffer* b = free.back();
      free.pop_back();
      return b;
    }
    auto b = std::make_unique<BatchBuffer>();
    b->data.reset(static_cast<uint8_t*>(AllocateBatchBuffer(bytes)));
    if (!b->data) return Status(StatusCode::kNoSpace, fmt::format("cannot allocate a batch buffer of {} bytes", bytes));
    std::memset(b->data.get(), 0, bytes);  // touch the pages now, not while a batch is due
    b->labels.assign(batch_size, -1);
    b->samples.assign(batch_size, 0);
    b->bad.assign(batch_size, 0);
    b->crops.assign(4 * static_cast<size_t>(batch_size), 0.0f);
    b->flips.assign(batch_size, 0);
    b->fields.assign(batch_size * fields_per_sample, std::string());
    b->present.assign(batch_size * fields_per_sample, 0);
    all.push_back(std::move(b));
    return all.back().get();
  }
  void Give(BatchBuffer* b) {
    std::lock_guard<std::mutex> lock(mu);
    b->filled = 0;
    free.push_back(b);
  }
};

BatchLease::BatchLease(std::shared_ptr<BatchBuffers> pool, BatchBuffer* buffer)
    : pool_(std::move(pool)), buffer_(buffer) {}
BatchLease::~BatchLease() { pool_->Give(buffer_); }

struct Pipeline::Impl {
  std::unique_ptr<io::MultiRootFileSystem> multi;  // when data names several roots
  io::FileSystem& fs;
  PipelineOptions o;
  std::shared_ptr<const Catalog> cat;
  std::vector<EpochPlan> plans;
  uint64_t per_epoch = 0;  // outputs (and read positions) per epoch
  uint64_t total = 0;      // outputs over all epochs
  uint64_t total_batches = 0;
  size_t sample_bytes = 0;
  size_t depth = 0;              // batch buffers
  uint64_t capacity = 0;         // payload slots
  uint64_t mean_payload = 0;     // record sizes: mean
  uint64_t typical_payload = 0;  // ... 99th percentile
  uint64_t memory_bound = 0;
  std::vector<Run> runs;

  struct Slot {
    std::string data;
    Status error;
  };
  std::vector<Slot> slots;
  std::atomic<uint64_t> payload_allocated{0};  // the records in the slots now: their strings' capacities
  std::atomic<uint64_t> payload_peak{0};       // ... at most so far
  std::shared_ptr<BatchBuffers> pool;
  uint64_t window = 1;  // batches workers fill ahead of the next one delivered

  // A good sample kept from the batches delivered (consumer thread only):
  // a batch whose every sample is bad is filled with it under
  // on_error=skip, as bad samples are with a good one of their own batch.
  struct Spare {
    bool valid = false;
    std::vector<uint8_t> data;
    int32_t label = -1;
    uint32_t sample = 0;
    float crop[4] = {0, 0, 0, 0};
    uint8_t flip = 0;
    std::vector<std::string> fields;
    std::vector<uint8_t> present;
  } spare;

  // ---- shared state, guarded by mu ----
  std::mutex mu;
  std::condition_variable cv_read, cv_payload, cv_buffer, cv_batch;
  std::vector<int32_t> free_slots;
  std::vector<int32_t> slot_of;  // global read position -> slot (-1: not read yet)
  uint64_t outputs_done = 0;
  uint64_t next_batch = 0;                     // the next batch to deliver
  std::map<uint64_t, BatchBuffer*> producing;  // batches being filled
  uint64_t start_output = 0;                   // first output (start_step * batch)
  uint64_t held = 0, held_sum = 0, held_samples = 0;
  Status fatal;
  bool stopping = false;
  PipelineStats st;  // problems, bad_samples (under mu)

  // Samples whose JPEG was read to its end marker without damage once this
  // run: later epochs need not read past their crops again (damage_check).
  std::shared_ptr<DamageChecked> checked_clean;

  // ---- counters ----
  std::atomic<size_t> next_run{0};
  std::atomic<uint64_t> next_output{0};
  std::atomic<int64_t> read_ns{0}, decode_ns{0}, wait_in_ns{0}, wait_out_ns{0}, consumer_ns{0};
  std::atomic<uint64_t> bytes_read{0}, records_read{0}, decoded{0}, dct_scaled{0};
  std::atomic<uint64_t> manifest_changed{0};
  // A TFRecord label below 1 was read as 1-based: the dataset's labels are
  // 0-based, every label read so far is shifted, and no sample is to be
  // trusted: the run stops whatever the error policy.
  std::atomic<bool> label_base_wrong{false};
  format::WdsSchema wds;  // from o.wds_image, o.wds_label (checked at Create)

  // ---- the read plan (PipelineOptions::plan_ahead) ----
  std::mutex plan_mu;       // one sender at a time; guards the fields below
  size_t plan_sent = 0;     // runs [0, plan_sent) were sent
  std::string plan_stream;  // this pipeline's name for its sequence of reads
  std::string plan_error;
  std::atomic<size_t> plan_next{0};  // the run whose reader sends the next window (lock-free check)
  std::atomic<uint64_t> planned{0}, plan_staged{0};

  std::unique_ptr<BatchLease> current;  // what Next() handed out last
  Clock::time_point start;
  Clock::time_point end;
  std::vector<std::thread> threads;

  Impl(io::FileSystem& f, PipelineOptions opt) : fs(f), o(std::move(opt)) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    NotifyAll();
    for (auto& t : threads) t.join();
  }

  // Wakes every waiting thread (the pipeline stops).
  void NotifyAll() {
    cv_read.notify_all();
    cv_payload.notify_all();
    cv_buffer.notify_all();
    cv_batch.notify_all();
  }

  // Whether a failed sample stops the run: under kFail, and for an outage
  // under either policy (a sample the store could not deliver is not a
  // damaged one).
  bool StopsTheRun(const Status& status) const {
    return o.policy == format::ErrorPolicy::kFail || format::IsOutage(status) ||
           label_base_wrong.load(std::memory_order_relaxed);
  }

  // Steps of Create, in order.
  Status PlanEpochs();
  void PlanRuns();
  Status PlanMemory();
  Status PrepareBuffers();
  void StartThreads();

  const SampleRef& SampleAt(uint32_t epoch, uint64_t pos) const { return cat->samples[plans[epoch].read_order[pos]]; }

  // ---------------------------------------------------------------- readers
  void ReaderLoop() {
    std::unique_ptr<io::RandomAccessFile> file;
    uint32_t open_file = UINT32_MAX;
    std::string read_buffer;  // every run's, allocated once
    while (true) {
      const size_t r = next_run.fetch_add(1);
      if (r >= runs.size()) return;
      const Run run = runs[r];
      if (o.plan_ahead > 0 && r >= plan_next.load(std::memory_order_relaxed)) SendPlan(r);
      const SampleRef& first = SampleAt(run.epoch, run.first);
      if (open_file != first.file) {
        auto f = fs.OpenRead(cat->files[first.file], io::AccessHint::kSequential);
        if (!f.ok()) {
          // Every sample of the run is bad; let the workers report each one.
          for (uint64_t k = 0; k < run.count; ++k) {
            if (!Deliver(run.epoch, run.first + k, nullptr, f.status())) return;
          }
          open_file = UINT32_MAX;
          continue;
        }
        file = std::move(*f);
        open_file = first.file;
      }
      uint64_t run_bytes = 0;
      for (uint64_t k = 0; k < run.count; ++k) run_bytes += SampleAt(run.epoch, run.first + k).size;
      io::SequentialReader in(*file, static_cast<size_t>(std::clamp<uint64_t>(run_bytes, 4096, kReadBufferBytes)),
                              first.offset, &read_buffer);
      for (uint64_t k = 0; k < run.count; ++k) {
        if (!Deliver(run.epoch, run.first + k, &in, Status::Ok())) return;
      }
    }
  }

  // The reads of runs [from, to): consecutive runs of one file's
  // contiguous records are one read.
  std::vector<io::FileSystem::PlannedRead> PlannedReads(size_t from, size_t to) const {
    std::vector<io::FileSystem::PlannedRead> reads;
    for (size_t k = from; k < to; ++k) {
      const Run& run = runs[k];
      const SampleRef& first = SampleAt(run.epoch, run.first);
      uint64_t bytes = 0;
      for (uint64_t i = 0; i < run.count; ++i) bytes += SampleAt(run.epoch, run.first + i).size;
      const std::string& path = cat->files[first.file];
      if (!reads.empty() && reads.back().path == path && reads.back().offset + reads.back().length == first.offset) {
        reads.back().length += bytes;
      } else {
        reads.push_back({path, first.offset, bytes});
      }
    }
    return reads;
  }

  // Sends the next window of the read plan: the runs from `r` (the one a
  // reader is about to read) or from where the last window ended, up to
  // plan_ahead runs past `r`; the next is sent when readers are half way
  // through this one. Consecutive runs of one file's contiguous records are
  // one read. A failure is reported once (stats) and ends the plan: it is
  // advice, and reads go on without it.
  void SendPlan(size_t r) {
    std::unique_lock<std::mutex> lock(plan_mu, std::try_to_lock);
    if (!lock.owns_lock() || r < plan_next.load()) return;  // another reader is sending it
    const size_t from = std::max(plan_sent, r);
    const size_t to = std::min(runs.size(), r + o.plan_ahead);
    if (plan_stream.empty()) {
      static std::atomic<uint64_t> pipelines{0};
      plan_stream = fmt::format("pipeline-{}-{}-rank{}", ::getpid(), pipelines.fetch_add(1), o.rank);
    }
    std::vector<io::FileSystem::PlannedRead> reads = PlannedReads(from, to);
    plan_sent = to;
    plan_next = to >= runs.size() ? SIZE_MAX : std::max(r + 1, to - std::min<size_t>(to - r, o.plan_ahead / 2));
    if (reads.empty()) return;
    auto n = fs.Plan(plan_stream, reads);
    if (!n.ok()) {
      plan_error = n.status().ToString();
      plan_next = SIZE_MAX;
      return;
    }
    planned += reads.size();
    plan_staged += *n;
  }

  // Waits for room, reads one record into a slot and publishes it. False
  // when the pipeline is stopping.
  bool Deliver(uint32_t epoch, uint64_t pos, io::SequentialReader* in, Status open_error) {
    const uint64_t gpos = epoch * per_epoch + pos;
    int32_t s;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv_read.wait(lock, [&] { return stopping || (gpos < outputs_done + capacity && !free_slots.empty()); });
      if (stopping) return false;
      s = free_slots.back();
      free_slots.pop_back();
    }
    Slot& slot = slots[s];
    slot.error = std::move(open_error);
    if (slot.error.ok()) {
      const SampleRef& ref = SampleAt(epoch, pos);
      auto t0 = Clock::now();
      in->Seek(ref.offset);
      pool->TakeRecord(ref.size, &slot.data);
      auto got = in->Read(static_cast<size_t>(ref.size), &slot.data);
      const uint64_t now = payload_allocated += slot.data.capacity();
      for (uint64_t was = payload_peak.load(); now > was && !payload_peak.compare_exchange_weak(was, now);) {
      }
      read_ns += Nanos(t0, Clock::now());
      if (!got.ok()) {
        slot.error = got.status();
      } else {
        if (*got != ref.size) {
          slot.error = Truncated(fmt::format("{}: record {} at offset {}: file ends after {} of {} bytes",
                                             cat->files[ref.file], ref.record, ref.offset, *got, ref.size));
        }
        bytes_read += *got;
      }
      records_read += 1;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      slot_of[gpos] = s;
      ++held;
    }
    cv_payload.notify_all();
    return true;
  }

  // ---------------------------------------------------------------- workers
  struct Worker {
    image::RegionDecoder decoder;
    image::Resampler resampler;
    image::Image small;
    std::string scratch;
    std::vector<image::NormBox> boxes;
  };

  struct ChooseContext {
    const Impl* impl;
    Rng* rng;
    const std::vector<image::NormBox>* boxes;
    bool read_to_end = false;
    bool flip = false;
    float crop[4] = {0, 0, 1, 1};  // x0, y0, x1, y1 as fractions of the source
  };

  // Where a sample went: its crop (fractions of the source) and flip.
  struct Geometry {
    float* crop = nullptr;  // 4 floats
    uint8_t* flip = nullptr;
    void Set(const ChooseContext& c) const {
      std::copy(std::begin(c.crop), std::end(c.crop), crop);
      *flip = c.flip ? 1 : 0;
    }
  };

  static image::RegionRequest Choose(const image::JpegHeader& h, void* ctx) {
    auto* c = static_cast<ChooseContext*>(ctx);
    const PipelineOptions& o = c->impl->o;
    image::CropBox box;
    if (!o.training) {
      box = image::CenterCropAfterResize(h.width, h.height, o.eval_resize, o.image_size);
    } else if (o.bbox_crop && c->boxes != nullptr && !c->boxes->empty()) {
      box = image::DistortedBoundingBoxCrop(h.width, h.height, *c->boxes, *c->rng);
      c->flip = c->rng->Below(2) == 1;
    } else {
      box = image::RandomResizedCrop(h.width, h.height, *c->rng, o.crop);
      c->flip = c->rng->Below(2) == 1;
    }
    image::RegionRequest req;
    req.x = box.x;
    req.y = box.y;
    req.w = box.w;
    req.h = box.h;
    const double sw = std::max(1, h.width), sh = std::max(1, h.height);
    c->crop[0] = static_cast<float>(box.x / sw);
    c->crop[1] = static_cast<float>(box.y / sh);
    c->crop[2] = static_cast<float>((box.x + box.w) / sw);
    c->crop[3] = static_cast<float>((box.y + box.h) / sh);
    req.out_w = req.out_h = o.image_size;
    req.allow_dct_scaling = o.dct_scaling && (o.training || o.eval_dct_scaling);
    req.fast_idct = o.fast_idct;
    req.read_to_end = c->read_to_end;
    return req;
  }

  // Parses, decodes and augments one sample into dst; sets *label, its
  // geometry and its o.fields (fields/present: one entry per field).
  Status Process(Worker& w, uint32_t sample_id, const SampleRef& ref, std::string_view framed, uint64_t rng_key,
                 void* dst, int32_t* label, const Geometry& geo, std::string* fields, uint8_t* present) {
    std::string_view jpeg;
    const std::string& file = cat->files[ref.file];
    w.boxes.clear();
    for (size_t k = 0; k < o.fields.size(); ++k) {
      fields[k].clear();
      present[k] = 0;
    }
    auto take = [&](std::string_view name, std::string_view value) {
      for (size_t k = 0; k < o.fields.size(); ++k) {
        if (!present[k] && o.fields[k] == name) {
          fields[k].assign(value.data(), value.size());
          present[k] = 1;
        }
      }
    };
    switch (cat->format) {
      case dataset::Format::kTFRecord: {
        std::string where = fmt::format("{}: record {} at offset {}", file, ref.record, ref.offset);
        std::string_view data = AQ_TRY(format::UnframeTFRecord(framed, o.verify_crc, where));
        auto f = format::ParseImageFields(data);
        if (!f.ok()) return f.status().WithContext(where);
        if (!f->has_label) return Corruption(where + ": no image/class/label");
        jpeg = f->encoded;
        if (o.labels_zero_based && f->label < 1) {
          label_base_wrong.store(true, std::memory_order_relaxed);
          return InvalidArgument(fmt::format(
              "{}: label {} in a TFRecord read as 1-based (TensorFlow's ImageNet convention, 0 = background): this "
              "dataset's labels look 0-based; read it with labels_zero_based=False (bench: --raw-labels)",
              where, f->label));
        }
        *label = static_cast<int32_t>(f->label - (o.labels_zero_based ? 1 : 0));
        if (o.bbox_crop && o.training) AQ_TRY(ParseBoxes(data, &w.boxes));
        if (!o.fields.empty()) {
          AQ_TRY(format::ForEachFeature(data, [&](const format::FeatureView& fv) -> Status {
            take(fv.key, fv.raw);
            return Status::Ok();
          }));
        }
        break;
      }
      case dataset::Format::kRecordIO: {
        std::string where = fmt::format("{}: record {} at offset {}", file, ref.record, ref.offset);
        std::string_view payload = AQ_TRY(format::UnframeRecordIO(framed, &w.scratch, where));
        auto v = format::UnpackImageRecord(payload);
        if (!v.ok()) return v.status().WithContext(where);
        jpeg = v->image;
        *label = static_cast<int32_t>(v->header.flag > 0 ? v->header.labels.front() : v->header.label);
        if (!o.fields.empty()) {
          // im2rec's header: every label (with --pack-label, a detection
          // record's box list), and the record's id.
          const std::vector<float>& all = v->header.flag > 0 ? v->header.labels : std::vector<float>{v->header.label};
          take("labels", std::string_view(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(float)));
          take("id", std::string_view(reinterpret_cast<const char*>(&v->header.id), sizeof(v->header.id)));
        }
        break;
      }
      case dataset::Format::kWebDataset: {
        std::string where = fmt::format("{}: sample {} at offset {}", file, ref.record, ref.offset);
        auto f = format::ParseWdsSample(framed, where, wds);
        if (!f.ok()) return f.status();
        jpeg = f->image;
        *label = f->has_label ? static_cast<int32_t>(f->label) : -1;
        for (const auto& [ext, data] : f->members) take(ext, data);
        break;
      }
      default: jpeg = framed; *label = ref.label;
    }
    Rng rng = Rng::Derive(o.seed, rng_key);
    auto t0 = Clock::now();
    Status s;
    bool passed = false;
    if (o.encoded_images && image::LooksLikeJpeg(jpeg)) {
      const size_t k = o.fields.size() - 1;
      s = PassEncoded(w, jpeg, rng, sample_id, geo, &fields[k]);
      passed = s.ok() && !fields[k].empty();
      present[k] = passed ? 1 : 0;
    }
    if (s.ok() && !passed) s = Decode(w, jpeg, rng, dst, sample_id, geo);
    decode_ns += Nanos(t0, Clock::now());
    if (!s.ok()) {
      return s.WithContext(cat->format == dataset::Format::kFolder
                               ? file
                               : fmt::format("{}: record {} at offset {}", file, ref.record, ref.offset));
    }
    return Status::Ok();
  }

  static Status ParseBoxes(std::string_view example, std::vector<image::NormBox>* out) {
    std::vector<float> v[4];
    static constexpr std::string_view kKeys[4] = {format::keys::kXmin, format::keys::kYmin, format::keys::kXmax,
                                                  format::keys::kYmax};
    AQ_TRY(format::ForEachFeature(example, [&](const format::FeatureView& f) -> Status {
      for (int i = 0; i < 4; ++i) {
        if (f.key == kKeys[i]) v[i] = AQ_TRY(format::ParseFeature(f.raw)).floats;
      }
      return Status::Ok();
    }));
    size_t n = std::min({v[0].size(), v[1].size(), v[2].size(), v[3].size()});
    for (size_t i = 0; i < n; ++i) out->push_back({v[0][i], v[1][i], v[2][i], v[3][i]});
    return Status::Ok();
  }

  // The crop box of img to the batch slot: resample, then jitter, flip,
  // normalise and store. Without jitter each resampled row goes straight to
  // the slot (no full-size intermediate image).
  Status Transform(Worker& w, const image::Image& img, double x, double y, double bw, double bh, bool flip, Rng& rng,
                   void* dst) {
    const int n = o.image_size;
    if (o.jitter.enabled() || img.channels != 3) {
      AQ_TRY(w.resampler.Run(img, x, y, bw, bh, n, n, &w.small));
      if (o.jitter.enabled()) image::ApplyColorJitter(w.small, o.jitter, rng);
      image::StoreSample(w.small, flip, o.store, dst);
      return Status::Ok();
    }
    return w.resampler.Run(img, x, y, bw, bh, n, n,
                           [&](int row, const uint8_t* rgb) { image::StoreRow(rgb, n, row, n, flip, o.store, dst); });
  }

  // Samples in other image formats (image folders and records may hold them):
  // decoded whole, then the same crop, resampling and augmentation.
  Status DecodeOther(Worker& w, std::string_view encoded, Rng& rng, void* dst, const Geometry& geo) {
    const image::Image img = image::ToRgb(AQ_TRY(image::DecodeImage(encoded)));
    if (o.decode_only || o.entropy_only) return Status::Ok();
    ChooseContext ctx{this, &rng, &w.boxes};
    const image::RegionRequest req = Choose(image::JpegHeader{img.width, img.height, 3}, &ctx);
    const double x = std::clamp(req.x, 0.0, img.width - 1.0), y = std::clamp(req.y, 0.0, img.height - 1.0);
    const double bw = std::clamp(req.w, 1.0, img.width - x), bh = std::clamp(req.h, 1.0, img.height - y);
    ctx.crop[0] = static_cast<float>(x / img.width);
    ctx.crop[1] = static_cast<float>(y / img.height);
    ctx.crop[2] = static_cast<float>((x + bw) / img.width);
    ctx.crop[3] = static_cast<float>((y + bh) / img.height);
    geo.Set(ctx);
    AQ_TRY(Transform(w, img, x, y, bw, bh, ctx.flip, rng, dst));
    return Status::Ok();
  }

  // Whether the manifest vouches for the sample's bytes (then they count as
  // read clean for the rest of the run).
  bool Verified(uint32_t sample_id, std::string_view jpeg) {
    DamageChecked& dc = *checked_clean;
    if (!o.use_manifest || dc.verified.empty() || !dc.verified[sample_id]) return false;
    if (crc32c::Value(jpeg) != dc.verified_crc[sample_id]) {
      manifest_changed += 1;
      return false;
    }
    if (!dc.clean[sample_id].exchange(true, std::memory_order_relaxed)) dc.trusted += 1;
    return true;
  }

  // encoded_images: a JPEG a GPU decoder takes, into *out as it is, with
  // the crop and flip Decode would choose (Choose first, from the same
  // generator). Damage is checked as Decode checks it. Any other JPEG
  // leaves *out empty and is decoded here.
  Status PassEncoded(Worker& w, std::string_view jpeg, Rng& rng, uint32_t sample_id, const Geometry& geo,
                     std::string* out) {
    const image::JpegInfo info = AQ_TRY(w.decoder.ReadInfo(jpeg));
    const bool takes =
        !info.progressive && !info.arithmetic &&
        (info.colorspace == image::JpegColorspace::kYCbCr || info.colorspace == image::JpegColorspace::kGray);
    if (!takes) return Status::Ok();
    if (o.damage_check && !checked_clean->clean[sample_id].load(std::memory_order_relaxed) &&
        !Verified(sample_id, jpeg)) {
      AQ_TRY(w.decoder.DecodeEntropy(jpeg));
      checked_clean->clean[sample_id].store(true, std::memory_order_relaxed);
    }
    ChooseContext ctx{this, &rng, &w.boxes};
    (void)Choose(image::JpegHeader{info.width, info.height, info.components}, &ctx);
    geo.Set(ctx);
    out->assign(jpeg.data(), jpeg.size());
    return Status::Ok();
  }

  Status Decode(Worker& w, std::string_view jpeg, Rng& rng, void* dst, uint32_t sample_id, const Geometry& geo) {
    if (!image::LooksLikeJpeg(jpeg) && image::IsConvertible(image::SniffImageFormat(jpeg))) {
      return DecodeOther(w, jpeg, rng, dst, geo);
    }
    if (o.entropy_only) return w.decoder.DecodeEntropy(jpeg);
    if (o.decode_only) {
      AQ_TRY(w.decoder.DecodeFull(jpeg, o.fast_idct));
      return Status::Ok();
    }
    ChooseContext ctx{this, &rng, &w.boxes};
    // A file's damage does not depend on its crop: read it to the end once
    // per run, then only as far as each crop needs.
    ctx.read_to_end = o.damage_check && !checked_clean->clean[sample_id].load(std::memory_order_relaxed) &&
                      !Verified(sample_id, jpeg);
    image::DecodedRegion region = AQ_TRY(w.decoder.Decode(jpeg, &Choose, &ctx));
    if (ctx.read_to_end) checked_clean->clean[sample_id].store(true, std::memory_order_relaxed);
    if (region.scale_denom > 1) dct_scaled += 1;
    geo.Set(ctx);
    AQ_TRY(Transform(w, *region.pixels, region.x, region.y, region.w, region.h, ctx.flip, rng, dst));
    return Status::Ok();
  }

  // A slot's record once it is decoded (the worker still owns the slot):
  // back to the shared record storage, so slots hold only the records in
  // flight, each in its size class. Slots kept their largest record's
  // memory before, and a long run's slots each met a large one.
  void FreeSlotMemory(std::string& data) {
    payload_allocated -= data.capacity();
    pool->GiveRecord(std::move(data));
    std::string().swap(data);
  }

  // Output j's slot and its batch's buffer, once its batch is within the
  // window and its record is read; nullopt when the pipeline stops.
  struct Claim {
    int32_t slot;
    BatchBuffer* buf;
  };
  std::optional<Claim> ClaimOutput(uint64_t batch, uint64_t gpos) {
    std::unique_lock<std::mutex> lock(mu);
    auto t0 = Clock::now();
    cv_buffer.wait(lock, [&] { return stopping || batch < next_batch + window; });
    auto t1 = Clock::now();
    cv_payload.wait(lock, [&] { return stopping || slot_of[gpos] >= 0; });
    wait_out_ns += Nanos(t0, t1);
    wait_in_ns += Nanos(t1, Clock::now());
    if (stopping) return std::nullopt;
    held_sum += held;
    ++held_samples;
    auto it = producing.find(batch);
    if (it == producing.end()) {
      auto taken = pool->Take();
      if (!taken.ok()) {
        if (fatal.ok()) fatal = taken.status();
        stopping = true;
        lock.unlock();
        NotifyAll();
        return std::nullopt;
      }
      it = producing.emplace(batch, *taken).first;
    }
    return Claim{slot_of[gpos], it->second};
  }

  // Gives the slot back and records the sample's outcome; whether its
  // batch is now complete.
  bool Release(int32_t s, BatchBuffer& buf, const SampleRef& ref, const Status& status, uint64_t gpos) {
    FreeSlotMemory(slots[s].data);
    std::lock_guard<std::mutex> lock(mu);
    slot_of[gpos] = -2;
    free_slots.push_back(s);
    --held;
    ++outputs_done;
    if (!status.ok()) {
      ++st.bad_samples;
      if (st.problems.size() < 100) {
        st.problems.push_back({cat->files[ref.file], ref.record, ref.offset, status.message()});
      }
      // The error must be visible before the batch can be seen complete, or
      // the consumer could take it with the bad slot silently replaced.
      if (StopsTheRun(status) && fatal.ok()) {
        fatal = status;
        stopping = true;
      }
    }
    return ++buf.filled == o.batch_size;
  }

  // Takes outputs in order: each one's record decoded into its place in
  // its batch.
  void WorkerLoop() {
    Worker w;
    const uint32_t B = o.batch_size;
    while (true) {
      const uint64_t j = next_output.fetch_add(1);
      if (j >= total) return;
      const uint32_t e = static_cast<uint32_t>(j / per_epoch);
      const uint64_t pos = plans[e].emit[j % per_epoch];
      const uint64_t gpos = e * per_epoch + pos;
      auto claim = ClaimOutput(j / B, gpos);
      if (!claim) return;
      BatchBuffer& buf = *claim->buf;
      const uint32_t i = static_cast<uint32_t>(j % B);
      const uint32_t sample_id = plans[e].read_order[pos];
      const SampleRef& ref = cat->samples[sample_id];
      int32_t label = -1;
      Status status = slots[claim->slot].error;
      if (status.ok()) {
        // The augmentation's randomness is a function of the seed, the
        // epoch's number and the output's place in it: the same whichever
        // epoch a run started at (a resumed run, one pipeline per epoch or
        // one over many give the same pixels), different every epoch.
        const uint64_t key = (static_cast<uint64_t>(o.first_epoch + e) << 40) | (j % per_epoch);
        const size_t nf = o.fields.size();
        status = Process(w, sample_id, ref, slots[claim->slot].data, key, buf.data.get() + i * sample_bytes, &label,
                         Geometry{buf.crops.data() + 4 * i, buf.flips.data() + i}, buf.fields.data() + i * nf,
                         buf.present.data() + i * nf);
      }
      buf.labels[i] = label;
      buf.samples[i] = sample_id;
      buf.bad[i] = status.ok() ? 0 : 1;
      if (status.ok()) decoded += 1;
      const bool complete = Release(claim->slot, buf, ref, status, gpos);
      if (!status.ok() && StopsTheRun(status)) {
        NotifyAll();
        return;
      }
      cv_read.notify_all();
      if (complete) cv_batch.notify_all();
    }
  }

  // ---------------------------------------------------------------- consumer
  int64_t FirstGood(const BatchBuffer& buf) const {
    for (uint32_t i = 0; i < o.batch_size; ++i) {
      if (!buf.bad[i]) return i;
    }
    return -1;
  }

  // Sample `from` of a batch copied over its sample `to` (a bad one).
  void CopySample(BatchBuffer& buf, uint32_t from, uint32_t to) const {
    std::memcpy(buf.data.get() + to * sample_bytes, buf.data.get() + from * sample_bytes, sample_bytes);
    buf.labels[to] = buf.labels[from];
    buf.samples[to] = buf.samples[from];
    std::copy_n(buf.crops.begin() + 4 * from, 4, buf.crops.begin() + 4 * to);
    buf.flips[to] = buf.flips[from];
    const size_t nf = o.fields.size();
    for (size_t k = 0; k < nf; ++k) {
      buf.fields[to * nf + k] = buf.fields[from * nf + k];
      buf.present[to * nf + k] = buf.present[from * nf + k];
    }
  }

  // Keeps a batch's good sample `i` as the spare: the first one seen, so
  // a run pays for one sample's copy.
  void KeepSpare(const BatchBuffer& buf, uint32_t i) {
    if (spare.valid) return;
    const uint8_t* px = buf.data.get() + i * sample_bytes;
    spare.data.assign(px, px + sample_bytes);
    spare.label = buf.labels[i];
    spare.sample = buf.samples[i];
    std::copy_n(buf.crops.begin() + 4 * i, 4, spare.crop);
    spare.flip = buf.flips[i];
    const size_t nf = o.fields.size();
    spare.fields.assign(buf.fields.begin() + i * nf, buf.fields.begin() + (i + 1) * nf);
    spare.present.assign(buf.present.begin() + i * nf, buf.present.begin() + (i + 1) * nf);
    spare.valid = true;
  }

  void FillFromSpare(BatchBuffer& buf, uint32_t i) const {
    std::memcpy(buf.data.get() + i * sample_bytes, spare.data.data(), sample_bytes);
    buf.labels[i] = spare.label;
    buf.samples[i] = spare.sample;
    std::copy_n(spare.crop, 4, buf.crops.begin() + 4 * i);
    buf.flips[i] = spare.flip;
    const size_t nf = o.fields.size();
    std::copy(spare.fields.begin(), spare.fields.end(), buf.fields.begin() + i * nf);
    std::copy(spare.present.begin(), spare.present.end(), buf.present.begin() + i * nf);
  }

  // Batch b had no good sample. The spare from an earlier batch fills it;
  // before any, the batches being filled after it are waited for and the
  // first good sample among them is taken. Only a run with no good sample
  // in reach fails.
  Status FindSpare(uint64_t b) {
    if (spare.valid) return Status::Ok();
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t last = std::min(total_batches, next_batch + window);
    for (uint64_t nb = next_batch; nb < last; ++nb) {
      cv_batch.wait(lock, [&] {
        if (!fatal.ok()) return true;
        auto it = producing.find(nb);
        return it != producing.end() && it->second->filled == o.batch_size;
      });
      if (!fatal.ok()) return fatal;
      const BatchBuffer& ahead = *producing[nb];
      const int64_t g = FirstGood(ahead);
      if (g >= 0) {
        lock.unlock();
        KeepSpare(ahead, static_cast<uint32_t>(g));
        return Status::Ok();
      }
    }
    const std::string last_problem = st.problems.empty() ? "" : st.problems.back().message;
    return Corruption(
        fmt::format("every sample of batches {} to {} is bad, and no good sample came before them; last "
                    "problem: {}",
                    b, last - 1, last_problem));
  }

  Result<std::unique_ptr<BatchLease>> NextLease(double timeout_s) {
    if (next_batch >= total_batches) {
      end = Clock::now();
      return std::unique_ptr<BatchLease>();
    }
    BatchBuffer* buf = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu);
      auto ready = [&] {
        if (!fatal.ok()) return true;
        auto it = producing.find(next_batch);
        return it != producing.end() && it->second->filled == o.batch_size;
      };
      auto t0 = Clock::now();
      if (timeout_s < 0) {
        cv_batch.wait(lock, ready);
      } else if (!cv_batch.wait_for(lock, std::chrono::duration<double>(timeout_s), ready)) {
        consumer_ns += Nanos(t0, Clock::now());
        return Status(StatusCode::kTimedOut, fmt::format("batch {} is not ready yet", next_batch));
      }
      consumer_ns += Nanos(t0, Clock::now());
      if (!fatal.ok()) return fatal;
      buf = producing[next_batch];
      producing.erase(next_batch);
      ++next_batch;
    }
    cv_buffer.notify_all();  // the production window moved
    const uint64_t b = next_batch - 1;
    auto lease = std::unique_ptr<BatchLease>(new BatchLease(pool, buf));
    const int64_t good = FirstGood(*buf);
    if (good >= 0) {
      KeepSpare(*buf, static_cast<uint32_t>(good));
    } else {
      AQ_TRY(FindSpare(b));
    }
    uint32_t replaced = 0;
    for (uint32_t i = 0; i < o.batch_size; ++i) {
      if (!buf->bad[i]) continue;
      if (good >= 0) {
        CopySample(*buf, static_cast<uint32_t>(good), i);
      } else {
        FillFromSpare(*buf, i);
      }
      ++replaced;
    }
    Batch& v = lease->batch_;
    const uint64_t steps = per_epoch / o.batch_size;
    v.index = b;
    v.epoch = o.first_epoch + static_cast<uint32_t>(b / steps);
    v.step = b % steps;
    v.size = o.batch_size;
    v.data = buf->data.get();
    v.sample_bytes = sample_bytes;
    v.labels = buf->labels.data();
    v.samples = buf->samples.data();
    v.replaced = replaced;
    v.crops = buf->crops.data();
    v.flips = buf->flips.data();
    v.fields = buf->fields.data();
    v.present = buf->present.data();
    end = Clock::now();
    return lease;
  }

  Result<const Batch*> Next() {
    current.reset();  // the previous batch goes back to the pool
    current = AQ_TRY(NextLease(-1));
    if (current == nullptr) return static_cast<const Batch*>(nullptr);
    return &current->batch();
  }
};

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;

// One epoch plan per epoch, and where a resumed run starts.
Status Pipeline::Impl::PlanEpochs() {
  std::vector<uint32_t> files_of(cat->samples.size());
  for (size_t i = 0; i < cat->samples.size(); ++i) files_of[i] = cat->samples[i].file;
  for (uint32_t e = 0; e < o.epochs; ++e) {
    PlanOptions po;
    po.seed = o.seed;
    po.epoch = o.first_epoch + e;
    po.rank = o.rank;
    po.world = o.world;
    po.batch_size = o.batch_size;
    po.shuffle_buffer = o.shuffle_buffer;
    po.shuffle_files = o.shuffle_files;
    po.remainder = o.remainder;
    plans.push_back(AQ_TRY(MakeEpochPlan(files_of, static_cast<uint32_t>(cat->files.size()), po)));
  }
  per_epoch = plans[0].emit.size();
  total = per_epoch * o.epochs;
  total_batches = total / o.batch_size;
  const uint64_t steps = per_epoch / o.batch_size;
  if (o.start_step >= steps) {
    return InvalidArgument(fmt::format("pipeline: resuming at step {} of an epoch of {} steps", o.start_step, steps));
  }
  start_output = o.start_step * o.batch_size;
  next_output = start_output;
  outputs_done = start_output;
  next_batch = o.start_step;
  return Status::Ok();
}

// Runs of consecutive records, per epoch, capped so several readers can
// share a large file. Resuming, the first epoch reads only what the
// outputs still to come need.
void Pipeline::Impl::PlanRuns() {
  const Catalog& c = *cat;
  for (uint32_t e = 0; e < o.epochs; ++e) {
    const auto& ro = plans[e].read_order;
    std::vector<bool> needed;
    if (e == 0 && start_output > 0) {
      needed.assign(ro.size(), false);
      const auto& emit = plans[0].emit;
      for (uint64_t j = start_output; j < emit.size(); ++j) needed[emit[j]] = true;
    }
    auto need = [&](uint64_t k) { return needed.empty() || needed[k]; };
    uint64_t k = 0;
    while (k < ro.size()) {
      if (!need(k)) {
        ++k;
        continue;
      }
      uint64_t n = 1, bytes = c.samples[ro[k]].size;
      while (k + n < ro.size() && need(k + n) && c.format != dataset::Format::kFolder &&
             ro[k + n] == ro[k + n - 1] + 1 && c.samples[ro[k + n]].file == c.samples[ro[k]].file &&
             bytes < kMaxRunBytes) {
        bytes += c.samples[ro[k + n]].size;
        ++n;
      }
      runs.push_back({e, k, n});
      k += n;
    }
  }
}

// Memory: batch buffers + records in flight + per-worker decode scratch,
// as the pipeline fills them (the estimate is checked against a process's
// peak in tests/python/test_loader_memory.py):
// - batch buffers: the production window (prefetch), the batch handed
//   out, and those the consumer still holds when it asks for the next;
// - records: every slot full (the shuffle buffer and the lookahead), each
//   record in its own size (a slot frees it once decoded), at the mean
//   record size plus a quarter for what the allocator keeps between
//   records of different sizes; a record of any size in each reader and
//   worker;
// - overlapped: a Loader opens the next pipeline once this one has taken
//   the buffer of its last batch (prefetch batches before the end), so
//   from then on this one holds at most its last window and what the
//   consumer holds, and the next one its production window; counted as
//   the next one's window instead of the batch handed out, its decode
//   scratch, and this one's last records while the next fills its slots.
Status Pipeline::Impl::PlanMemory() {
  sample_bytes = static_cast<size_t>(o.image_size) * o.image_size * 3 * image::DTypeSize(o.store.dtype);
  depth = o.prefetch_batches + 1;
  window = std::max<uint64_t>(1, o.prefetch_batches);
  uint64_t max_payload = 0, sum_payload = 0;
  std::vector<uint64_t> sizes;
  sizes.reserve(cat->samples.size());
  for (const auto& s : cat->samples) {
    max_payload = std::max(max_payload, s.size);
    sum_payload += s.size;
    sizes.push_back(s.size);
  }
  auto p99_at = sizes.begin() + static_cast<std::ptrdiff_t>(sizes.size() * 99 / 100);
  std::nth_element(sizes.begin(), p99_at, sizes.end());
  typical_payload = *p99_at;
  mean_payload = sizes.empty() ? 0 : sum_payload / sizes.size();
  const uint64_t batch_bytes = static_cast<uint64_t>(o.batch_size) * sample_bytes;
  const uint64_t batches = o.held_batches + window + (o.overlapped ? window : 1);
  const uint64_t batch_mem = batches * batch_bytes;
  const uint64_t scratch_per_worker =
      std::min(kDecodeScratchBytes, kDecodeScratchBase + kBytesPerRecordByte * max_payload) + 2 * max_payload;
  const uint64_t scratch_mem = (o.overlapped ? 2 : 1) * o.workers * scratch_per_worker + o.readers * kReadBufferBytes;
  capacity = std::max<uint64_t>(o.shuffle_buffer, 1) + depth * o.batch_size + 2 * o.workers + 16;
  capacity = std::min<uint64_t>(capacity, std::max<uint64_t>(1, total));  // a small dataset
  const uint64_t tail = o.overlapped ? std::min<uint64_t>(capacity, window * o.batch_size) : 0;
  const uint64_t payload_mem =
      (capacity + tail) * (mean_payload + mean_payload / 4 + 64) + (o.readers + o.workers) * max_payload;
  // encoded_images: each batch buffer's samples keep the bytes of the
  // largest JPEG they held (a field's string keeps its capacity).
  const uint64_t encoded_mem = o.encoded_images ? batches * o.batch_size * (typical_payload + 64) : 0;
  memory_bound = batch_mem + scratch_mem + payload_mem + encoded_mem;
  if (memory_bound > o.memory_limit) {
    return InvalidArgument(fmt::format(
        "pipeline needs up to {:.0f} MiB but the memory limit is {:.0f} MiB: {} batch buffers of {:.1f} MiB ({} "
        "prefetched, {}{}), {:.0f} MiB for {} records in flight (shuffle buffer {} + lookahead{}; records are "
        "{:.2f} MiB on average, 99% at most {:.2f} MiB), decode scratch {:.0f} MiB{}. Lower the batch size, the "
        "prefetch depth or the shuffle buffer, or raise the memory limit",
        memory_bound / 1048576.0, o.memory_limit / 1048576.0, batches, batch_bytes / 1048576.0, window,
        o.overlapped ? fmt::format("{} for the next epoch's start", window) : std::string("1 handed out"),
        o.held_batches ? fmt::format(", {} held by the loop", o.held_batches) : "", payload_mem / 1048576.0,
        capacity + tail, o.shuffle_buffer, tail ? fmt::format(" + {} of the next epoch's start", tail) : "",
        mean_payload / 1048576.0, typical_payload / 1048576.0, scratch_mem / 1048576.0,
        encoded_mem ? fmt::format(", {:.0f} MiB of encoded images in the batches", encoded_mem / 1048576.0) : ""));
  }
  return Status::Ok();
}

// The verification manifest of the dataset at `data`, as flags and CRCs
// per catalog sample. A file whose record count differs from the
// manifest's is not trusted at all; a manifest that cannot be read is
// reported in the stats and changes nothing else.
static void ReadManifest(io::FileSystem& fs, const std::string& data, const Catalog& cat, DamageChecked& dc) {
  const bool one_file = cat.files.size() == 1 && cat.files[0] == data;
  const std::string path = format::ManifestPath(data, one_file);
  auto read = format::ReadManifest(fs, path);
  if (!read.ok()) {
    dc.manifest = fmt::format("not used: {}", read.status().message());
    return;
  }
  if (!read->has_value()) return;
  const format::Manifest& m = **read;
  if (m.damage_rules != format::kDamageRules) {
    dc.manifest = fmt::format("not used: '{}' was written under damage rules {}, these are {}", path, m.damage_rules,
                              format::kDamageRules);
    return;
  }
  std::vector<uint32_t> records(cat.files.size(), 0);
  for (const auto& s : cat.samples) records[s.file] = std::max(records[s.file], s.record + 1);
  std::vector<const format::ManifestFile*> entry(cat.files.size(), nullptr);
  for (size_t f = 0; f < cat.files.size(); ++f) {
    auto it = m.files.find(format::ManifestName(path, cat.files[f]));
    if (it != m.files.end() && it->second.image_crc32c.size() == records[f]) entry[f] = &it->second;
  }
  dc.verified.assign(cat.samples.size(), 0);
  dc.verified_crc.assign(cat.samples.size(), 0);
  uint64_t n = 0;
  for (size_t i = 0; i < cat.samples.size(); ++i) {
    const SampleRef& s = cat.samples[i];
    if (entry[s.file] == nullptr || !entry[s.file]->Trusted(s.record)) continue;
    dc.verified[i] = 1;
    dc.verified_crc[i] = entry[s.file]->image_crc32c[s.record];
    ++n;
  }
  dc.manifest = fmt::format("{}: {} of {} samples verified", path, n, cat.samples.size());
}

// Record slots, the damage-check memory and the batch buffers: those an
// earlier pipeline shares when they fit (its batch buffers and, with them,
// its record storage), else new ones.
Status Pipeline::Impl::PrepareBuffers() {
  const size_t buffer_bytes = (static_cast<size_t>(o.batch_size) * sample_bytes + 63) & ~size_t{63};
  const bool shared = o.buffers && o.buffers->bytes == buffer_bytes && o.buffers->batch_size == o.batch_size &&
                      o.buffers->fields_per_sample == o.fields.size();
  if (shared) {
    pool = o.buffers;
  } else {
    pool = std::make_shared<BatchBuffers>();
    pool->bytes = buffer_bytes;
    pool->batch_size = o.batch_size;
    pool->fields_per_sample = o.fields.size();
  }
  o.buffers.reset();
  slots.resize(capacity);
  free_slots.reserve(capacity);
  for (int64_t i = static_cast<int64_t>(capacity) - 1; i >= 0; --i) free_slots.push_back(static_cast<int32_t>(i));
  slot_of.assign(total, -1);
  checked_clean = o.damage_checked && o.damage_checked->clean.size() == cat->samples.size()
                      ? o.damage_checked
                      : std::make_shared<DamageChecked>(cat->samples.size());
  o.damage_checked.reset();
  if (o.damage_check && o.use_manifest) {
    std::call_once(checked_clean->manifest_read, [&] { ReadManifest(fs, o.data, *cat, *checked_clean); });
  }
  // New buffers are touched now, not while a batch is due. Shared ones
  // were touched by the pipeline that made them; taking depth of them here
  // would make more while that one still fills its last batches.
  size_t have = 0;
  {
    std::lock_guard<std::mutex> lock(pool->mu);
    have = pool->all.size();
  }
  std::vector<BatchBuffer*> first;
  for (size_t i = have; i < depth; ++i) first.push_back(AQ_TRY(pool->Take()));
  for (auto* b : first) pool->Give(b);
  return Status::Ok();
}

void Pipeline::Impl::StartThreads() {
  st.rank = o.rank;
  st.world = o.world;
  st.steps_per_epoch = per_epoch / o.batch_size;
  st.catalog_samples = cat->samples.size();
  start = end = Clock::now();
  for (size_t r = 0; r < o.readers; ++r) threads.emplace_back([this] { ReaderLoop(); });
  for (size_t w = 0; w < o.workers; ++w) threads.emplace_back([this] { WorkerLoop(); });
}

// Create's steps up to the plan of runs: options checked, catalog, epoch
// plans, runs. Nothing is read beyond the indexes and no thread started.
Result<std::unique_ptr<Pipeline::Impl>> Pipeline::Plan(io::FileSystem& fs, const PipelineOptions& options) {
  std::unique_ptr<io::MultiRootFileSystem> multi;
  PipelineOptions opts = options;
  if (options.data.find(':') != std::string::npos) {
    auto roots = AQ_TRY(io::SplitRoots(options.data));
    opts.data = roots[0];
    multi = std::make_unique<io::MultiRootFileSystem>(fs, std::move(roots), options.root_policy, options.rank);
  }
  io::FileSystem& data_fs = multi ? static_cast<io::FileSystem&>(*multi) : fs;
  auto impl = std::make_unique<Impl>(data_fs, opts);
  impl->multi = std::move(multi);
  PipelineOptions& o = impl->o;
  if (o.batch_size == 0) return InvalidArgument("pipeline: batch size must be positive");
  if (o.image_size < 8 || o.image_size > 4096) return InvalidArgument("pipeline: image size must be in 8..4096");
  if (o.epochs == 0) return InvalidArgument("pipeline: at least one epoch");
  if (o.readers == 0) return InvalidArgument("pipeline: at least one reader thread");
  if (o.encoded_images) {
    if (o.decode_only || o.entropy_only) {
      return InvalidArgument(
          "pipeline: encoded images are delivered undecoded; decode_only/entropy_only measure decoding");
    }
    if (o.jitter.enabled()) {
      return InvalidArgument(
          "pipeline: colour jitter needs the pixels; with encoded images apply it where they are decoded");
    }
    o.fields.emplace_back(kEncodedImageField);
  }
  impl->wds = AQ_TRY(format::ParseWdsSchema(o.wds_image, o.wds_label));
  if (o.workers == 0) o.workers = HardwareThreads();
  impl->cat = o.catalog ? o.catalog
                        : std::make_shared<const Catalog>(
                              AQ_TRY(BuildCatalog(fs, o.data, {o.format, o.policy, o.allow_empty_classes})));
  // What the catalog could not read is named with the samples' problems.
  for (const auto& loss : impl->cat->losses) {
    if (impl->st.problems.size() < 100) impl->st.problems.push_back(loss);
  }
  impl->st.lost_parts = impl->cat->losses.size();
  o.catalog.reset();
  AQ_TRY(impl->PlanEpochs());
  impl->PlanRuns();
  return impl;
}

Result<std::unique_ptr<Pipeline>> Pipeline::Create(io::FileSystem& fs, const PipelineOptions& options) {
  auto impl = AQ_TRY(Plan(fs, options));
  AQ_TRY(impl->PlanMemory());
  AQ_TRY(impl->PrepareBuffers());
  impl->StartThreads();
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

Result<PlanSent> Pipeline::SendPlan(io::FileSystem& fs, const PipelineOptions& options, const std::string& stream) {
  auto impl = AQ_TRY(Plan(fs, options));
  PlanSent sent;
  sent.stream = stream;
  // In windows the size of a running pipeline's (the store bounds a plan
  // request's size), in order, appended to one stream.
  const size_t window = std::max<size_t>(impl->o.plan_ahead, 256);
  for (size_t from = 0; from < impl->runs.size(); from += window) {
    auto reads = impl->PlannedReads(from, std::min(impl->runs.size(), from + window));
    if (reads.empty()) continue;
    sent.taken_up += AQ_TRY(impl->fs.Plan(stream, reads));
    sent.reads += reads.size();
    for (const auto& r : reads) sent.bytes += r.length;
  }
  return sent;
}

Result<const Batch*> Pipeline::Next() { return impl_->Next(); }
Result<std::unique_ptr<BatchLease>> Pipeline::NextLease(double timeout_s) { return impl_->NextLease(timeout_s); }
std::shared_ptr<const Catalog> Pipeline::catalog() const { return impl_->cat; }
std::shared_ptr<DamageChecked> Pipeline::damage_checked() const { return impl_->checked_clean; }
std::shared_ptr<BatchBuffers> Pipeline::buffers() const { return impl_->pool; }

uint64_t Pipeline::steps_per_epoch() const { return impl_->per_epoch / impl_->o.batch_size; }
uint64_t Pipeline::samples_per_epoch() const { return impl_->per_epoch; }
size_t Pipeline::sample_bytes() const { return impl_->sample_bytes; }
const std::vector<std::string>& Pipeline::files() const { return impl_->cat->files; }

Pipeline::Where Pipeline::where(uint32_t id) const {
  const SampleRef& r = impl_->cat->samples.at(id);
  return {r.file, r.record};
}

PipelineStats Pipeline::Stats() const {
  Impl& m = *impl_;
  PipelineStats s;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    s = m.st;
    s.mean_payloads_held = m.held_samples ? static_cast<double>(m.held_sum) / static_cast<double>(m.held_samples) : 0;
  }
  s.elapsed_seconds = std::chrono::duration<double>(m.end - m.start).count();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    s.batches = m.next_batch - m.o.start_step;
  }
  s.images = s.batches * m.o.batch_size;
  s.bytes_read = m.bytes_read.load();
  s.payload_capacity = m.capacity;
  s.memory_bound_bytes = m.memory_bound;
  s.payload_bytes = m.payload_allocated.load();
  s.payload_peak_bytes = m.payload_peak.load();
  {
    std::lock_guard<std::mutex> lock(m.pool->mu);
    s.payload_pool_bytes = m.pool->record_bytes;
  }
  {
    std::lock_guard<std::mutex> lock(m.pool->mu);
    s.batch_buffers = m.pool->all.size();
    s.batch_buffer_bytes = s.batch_buffers * m.pool->bytes;
  }
  s.dct_scaled = m.dct_scaled.load();
  s.manifest = m.o.use_manifest && m.o.damage_check ? m.checked_clean->manifest : "";
  s.manifest_trusted = m.checked_clean->trusted.load();
  s.manifest_changed = m.manifest_changed.load();
  s.planned = m.planned.load();
  s.plan_staged = m.plan_staged.load();
  {
    std::lock_guard<std::mutex> lock(m.plan_mu);
    s.plan_error = m.plan_error;
  }
  const double el = std::max(1e-9, s.elapsed_seconds);
  StageStats read{"read", m.o.readers, m.read_ns.load() / 1e9, 0, m.records_read.load(), s.bytes_read};
  read.utilisation = read.busy_seconds / (el * static_cast<double>(read.threads));
  StageStats decode{"decode", m.o.workers, m.decode_ns.load() / 1e9, 0, m.decoded.load(), 0};
  decode.utilisation = decode.busy_seconds / (el * static_cast<double>(decode.threads));
  s.stages = {read, decode};
  s.consumer_wait_seconds = m.consumer_ns.load() / 1e9;
  if (m.multi) {
    for (size_t i = 0; i < m.multi->roots().size(); ++i) {
      s.roots.push_back({m.multi->roots()[i], m.multi->opens(i), m.multi->bytes_read(i)});
    }
  }
  s.worker_wait_input_seconds = m.wait_in_ns.load() / 1e9;
  s.worker_wait_output_seconds = m.wait_out_ns.load() / 1e9;
  // The limiting stage: workers mostly waiting for free batch buffers means
  // the consumer (the GPU) is the bottleneck; otherwise the busiest stage.
  const double worker_time = el * static_cast<double>(m.o.workers);
  if (s.worker_wait_output_seconds > 0.5 * worker_time) {
    s.limiting_stage = "consumer";
  } else {
    s.limiting_stage = read.utilisation > decode.utilisation ? "read" : "decode";
  }
  return s;
}

}  // namespace aq::pipeline
