// The input pipeline: read record files -> parse -> crop-decode JPEG ->
// resize -> flip / colour -> normalise -> batch, concurrently and buffered,
// the CPU work between storage and the GPU.
//
//   readers (R threads)      read runs of consecutive records of one file
//        |                   with large sequential reads into payload slots
//   payload slots (C)        bounded: readers stay < C positions ahead of
//        |                   the outputs already produced (back-pressure)
//   workers (T threads)      take output j in order, wait for its payload,
//        |                   parse, decode the crop, augment, and write the
//        |                   sample straight into its batch slot
//   batch buffers            aligned, reused: workers fill the next
//        |                   prefetch_batches batches; a batch handed out
//        |                   stays its holder's until released
//   Next() / NextLease()     delivers batches in order
//
// Everything random is decided by the seed: the epoch plan (file order,
// rank share, shuffle buffer; see plan.h) and each sample's augmentation
// (Rng::Derive(seed, output index)), so the same seed yields the same
// batches whatever the thread counts.
//
// PNG, GIF, BMP, WebP, TIFF and PPM/PGM samples are decoded too. A damaged or undecodable sample
// (libjpeg's warnings about the data count as damage) is counted and
// reported with its file and record number; under ErrorPolicy::kSkip its batch slot is filled with a
// copy of another sample of the same batch, so every rank still produces the
// same number of full batches; under kFail, Next() returns the error.
//
// Thread safety: Create/Next/NextLease/Stats from one consumer thread;
// leases may be released from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "dataset/dataset.h"
#include "format/error_policy.h"
#include "image/augment.h"
#include "io/file_system.h"
#include "io/multi_root.h"
#include "pipeline/catalog.h"
#include "pipeline/plan.h"

namespace aq::pipeline {

// Batch buffers (opaque): a pipeline's, kept alive by the batches it
// handed out, and reusable by a later pipeline with the same batch shape.
struct BatchBuffers;
struct BatchBuffer;

// One flag per catalog sample: read to its end without damage once.
struct DamageChecked {
  explicit DamageChecked(size_t samples) : clean(samples) {}
  std::vector<std::atomic<bool>> clean;
  // The dataset's verification manifest (dataset/manifest.h), read once per
  // run: per sample, whether it was verified clean and its image's CRC32C
  // then. Such a sample is clean while its bytes still have that CRC.
  std::once_flag manifest_read;
  std::vector<uint8_t> verified;
  std::vector<uint32_t> verified_crc;
  std::string manifest;  // "PATH: N of M samples verified", why it is not used, or "" (none)
  // Samples the manifest vouched for, each counted once however many
  // pipelines share these flags (a loader's next epoch starts before the
  // last one ends, and may reach a sample first).
  std::atomic<uint64_t> trusted{0};
};

struct PipelineOptions {
  // Dataset path: TFRecord shards, .rec files or an image folder. Several
  // roots holding the same dataset (one per mount / storage node) are given
  // as "root1:root2:..." and read according to root_policy.
  std::string data;
  io::RootPolicy root_policy = io::RootPolicy::kSpread;
  dataset::Format format = dataset::Format::kAuto;

  // Output.
  uint32_t batch_size = 256;
  int image_size = 224;    // 299 for Inception
  bool training = true;    // RandomResizedCrop + flip, else resize + centre crop
  int eval_resize = 256;   // evaluation: shorter side (224/256 = 0.875)
  bool bbox_crop = false;  // training crop from records' bounding boxes (TF's method)
  image::RandomResizedCropParams crop;
  image::ColorJitter jitter;
  image::StoreOptions store;
  bool labels_zero_based = true;     // TFRecord's 1-based ImageNet labels become 0-based
  bool allow_empty_classes = false;  // an image folder's class with no image keeps its label
  // WebDataset: the image and label members (format::ParseWdsSchema).
  std::string wds_image = format::kWdsImageDefault;
  std::string wds_label = format::kWdsLabelDefault;

  // Decode.
  bool dct_scaling = true;  // decode at 1/2, 1/4, 1/8 when the crop allows (training)
  // Evaluation decodes at full size, as torchvision does, unless this is
  // set too (faster on large images; MAE against torchvision in docs/python.md).
  bool eval_dct_scaling = false;
  bool fast_idct = false;
  bool decode_only = false;   // full decode only (measures the decoder bound)
  bool entropy_only = false;  // entropy decode only (the floor under any decode)
  // Read each JPEG's coded data to its end marker, rows below the crop too
  // (entropy decoding only), so a damaged file is reported whatever its
  // random crop covers. Once per sample per run: a file read clean once is
  // only read as far as its crop in later epochs. false skips even that.
  bool damage_check = true;
  // Decode elsewhere (a GPU): each JPEG a GPU decoder takes (sequential,
  // Huffman-coded, YCbCr or greyscale) is delivered compressed, as one more
  // field after `fields` (kEncodedImageField), with the crop and flip the
  // CPU path would have chosen (the same random draws); its pixels in the
  // batch are left as they were. Other samples (progressive, CMYK, PNG, ...)
  // are decoded here as usual, the field absent. Damage is still checked
  // here: an entropy decode, once per sample per run (see damage_check).
  // Colour jitter needs the pixels: refused with it.
  bool encoded_images = false;
  // Samples the dataset's verification manifest lists as verified clean
  // (`dataset pack`, `dataset verify --decode`) count as read clean while
  // their image bytes keep the CRC32C it gives: a verified dataset's first
  // epoch reads each file only as far as its crop, as later epochs do.
  bool use_manifest = true;

  // Extra fields delivered with each sample, by name: tf.Example feature
  // keys (the serialized Feature; Batch::fields), WebDataset member
  // extensions (the member's bytes), or RecordIO's "labels" (the im2rec
  // header's float labels, native order) and "id" (uint64). Folders have
  // none.
  std::vector<std::string> fields;

  // Order and sharding.
  uint64_t seed = 1;
  uint32_t first_epoch = 0;  // the number of the first epoch run (it picks that epoch's order)
  uint32_t epochs = 1;
  // Resuming: batches of the first epoch already delivered. They are neither
  // read nor decoded; the rest are exactly the batches an uninterrupted run
  // delivers (same order, same augmentation).
  uint64_t start_step = 0;
  uint64_t shuffle_buffer = 1024;
  bool shuffle_files = true;
  uint32_t rank = 0, world = 1;
  Remainder remainder = Remainder::kDrop;

  // Concurrency and memory.
  size_t workers = 0;  // decode threads; 0 = one per core
  size_t readers = 1;
  // The read plan: this many reads (runs of records, or files) ahead of
  // the readers are sent to the file system in the order they will be
  // read (io::FileSystem::Plan), so a store stages them from slow media
  // while earlier ones are decoded. 0 = off; a file system without
  // staging ignores it.
  size_t plan_ahead = 1024;
  size_t prefetch_batches = 2;  // batch buffers beyond the one being consumed
  uint64_t memory_limit = 2ull << 30;
  format::ErrorPolicy policy = format::ErrorPolicy::kSkip;
  bool verify_crc = true;

  // The catalog of `data` from an earlier pipeline over the same data (one
  // per epoch, say): used as is instead of reading the indexes again.
  std::shared_ptr<const Catalog> catalog;
  // Which samples an earlier pipeline over the same catalog already read to
  // their end without damage (damage_check): shared, so a run split into
  // one pipeline per epoch checks each file once, as one pipeline over all
  // epochs does. Ignored unless its size is the catalog's.
  std::shared_ptr<DamageChecked> damage_checked;
  // Batch buffers of an earlier pipeline with the same batch shape, and
  // the storage its records in flight took: used instead of allocating
  // (and touching) new ones. Ignored if the shapes differ.
  std::shared_ptr<BatchBuffers> buffers;

  // What the memory bound counts beyond the pipeline itself. held_batches:
  // batches the consumer still holds when it asks for the next (Next()
  // gives the previous one back first: 0; a training loop's current batch
  // while it fetches the next: 1). overlapped: another pipeline starts
  // before this one ends, as a Loader's next epochs do: its production
  // window, slots and decode scratch are counted with this one's tail.
  uint32_t held_batches = 0;
  bool overlapped = false;
};

// The field encoded_images delivers, after options.fields (a name no record
// member can have).
inline constexpr std::string_view kEncodedImageField = "\x01encoded-image";

struct Batch {
  uint64_t index = 0;          // batch number over the whole run (from start_step)
  uint32_t epoch = 0;          // first_epoch + the run's epoch
  uint64_t step = 0;           // batch number within its epoch
  uint32_t size = 0;           // samples
  const void* data = nullptr;  // size * sample_bytes, 64-byte aligned
  size_t sample_bytes = 0;
  const int32_t* labels = nullptr;    // size entries
  const uint32_t* samples = nullptr;  // catalog sample ids (size entries)
  uint32_t replaced = 0;              // slots filled with a copy because their sample was bad
  // Where each output came from in its source image, as fractions of the
  // source's width and height: x0, y0, x1, y1 of the crop (4 per sample),
  // and whether it was flipped horizontally (1 per sample). Boxes and
  // masks follow the image through these.
  const float* crops = nullptr;
  const uint8_t* flips = nullptr;
  // options.fields per sample (size x fields, sample-major) and whether
  // each was present in the record; with encoded_images, one more per
  // sample: kEncodedImageField.
  const std::string* fields = nullptr;
  const uint8_t* present = nullptr;
};

struct StageStats {
  std::string name;
  size_t threads = 0;
  double busy_seconds = 0;  // summed over threads
  double utilisation = 0;   // busy / (elapsed * threads)
  uint64_t items = 0;
  uint64_t bytes = 0;
};

struct RootStats {
  std::string path;
  uint64_t opens = 0;
  uint64_t bytes = 0;
};

struct PipelineStats {
  double elapsed_seconds = 0;
  uint64_t batches = 0;
  uint64_t images = 0;
  uint64_t bytes_read = 0;
  std::vector<StageStats> stages;         // read, decode
  double consumer_wait_seconds = 0;       // Next() waiting for a batch
  double worker_wait_input_seconds = 0;   // workers waiting for payloads
  double worker_wait_output_seconds = 0;  // workers waiting for a free batch buffer
  double mean_payloads_held = 0;          // occupancy of the payload slots
  uint64_t payload_capacity = 0;
  uint64_t memory_bound_bytes = 0;  // what the pipeline may hold at most
  uint64_t batch_buffers = 0;       // allocated now, shared with pipelines that share them (held batches too)
  uint64_t batch_buffer_bytes = 0;  // ... and their bytes
  uint64_t payload_bytes = 0;       // records held in slots now (their allocations)
  uint64_t payload_peak_bytes = 0;  // ... at most so far
  uint64_t payload_pool_bytes = 0;  // record storage made, in use or free (shared like the batch buffers)
  uint64_t bad_samples = 0;
  uint64_t lost_parts = 0;  // damaged tails of record files the catalog could not read (named in problems)
  std::vector<dataset::Problem> problems;  // first 100
  uint64_t dct_scaled = 0;                 // samples decoded at reduced scale
  std::string manifest;                    // DamageChecked::manifest
  uint64_t manifest_trusted = 0;           // samples not read to their end: the manifest vouched for them (once each)
  uint64_t planned = 0;                    // reads sent ahead in the read plan
  uint64_t plan_staged = 0;                // ... that the store took up for staging
  std::string plan_error;                  // why the plan stopped being sent ("" when it was not)
  uint64_t manifest_changed = 0;           // samples whose bytes differ from the manifest's: checked
  std::string limiting_stage;
  uint32_t rank = 0, world = 1;
  uint64_t steps_per_epoch = 0;
  uint64_t catalog_samples = 0;
  std::vector<RootStats> roots;  // when reading from several roots
};

// A batch its holder owns: the pipeline does not reuse its buffer until the
// lease is destroyed (from any thread, also after the pipeline is gone).
class BatchLease {
 public:
  ~BatchLease();
  BatchLease(const BatchLease&) = delete;
  BatchLease& operator=(const BatchLease&) = delete;
  const Batch& batch() const { return batch_; }
  // The batch's memory (batch().data), for zero-copy views.
  void* mutable_data() const { return const_cast<void*>(batch_.data); }

 private:
  friend class Pipeline;
  BatchLease(std::shared_ptr<BatchBuffers> pool, BatchBuffer* buffer);
  std::shared_ptr<BatchBuffers> pool_;
  BatchBuffer* buffer_;
  Batch batch_;
};

// What Pipeline::SendPlan sent: the reads of the plan (ranges of files in
// the order the pipeline would read them), the bytes they name, and how many
// the store took up for staging.
struct PlanSent {
  uint64_t reads = 0, bytes = 0, taken_up = 0;
  std::string stream;  // the plan's name at the store
};

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> Create(io::FileSystem& fs, const PipelineOptions& options);

  // Sends the read plan a pipeline with these options would send for its
  // epochs (options.epochs from options.first_epoch, this rank's share) to
  // the store, without reading anything: the nodes stage those reads from
  // their pools before the job starts (a Slurm prolog, a warm-up step).
  // `stream` names the plan; the same options give the same order as the
  // job's own pipeline. Fails as Create does on options and data, and with
  // the store's error if it refuses the plan.
  static Result<PlanSent> SendPlan(io::FileSystem& fs, const PipelineOptions& options, const std::string& stream);
  ~Pipeline();  // stops and joins all threads

  // The next batch in order, or nullptr after the last one. The batch stays
  // valid until the next call to Next() (its buffer is then reused).
  Result<const Batch*> Next();

  // The next batch as a lease, or nullptr after the last one. Holding
  // leases never stalls the pipeline: it allocates more batch buffers when
  // all are held (memory the holder answers for). With timeout_s >= 0, waits
  // at most that long: kTimedOut then, and a later call continues.
  // Do not mix with Next() on one pipeline.
  Result<std::unique_ptr<BatchLease>> NextLease(double timeout_s = -1);

  // The catalog, for the next pipeline over the same data.
  std::shared_ptr<const Catalog> catalog() const;
  // The samples this pipeline (and those it was given) found undamaged.
  std::shared_ptr<DamageChecked> damage_checked() const;
  // Its batch buffers, for the next pipeline of the same shape.
  std::shared_ptr<BatchBuffers> buffers() const;

  PipelineStats Stats() const;
  uint64_t steps_per_epoch() const;
  uint64_t samples_per_epoch() const;  // this rank's
  size_t sample_bytes() const;
  const std::vector<std::string>& files() const;
  // Where catalog sample `id` (Batch::samples) is stored: its file (index
  // into files()) and record number.
  struct Where {
    uint32_t file = 0;
    uint32_t record = 0;
  };
  Where where(uint32_t id) const;

 private:
  struct Impl;
  // Create's steps up to the plan of runs (pipeline.cc).
  static Result<std::unique_ptr<Impl>> Plan(io::FileSystem& fs, const PipelineOptions& options);
  explicit Pipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace aq::pipeline
