// aquifer doctor: what limits training on a dataset, and which image form
// and node count remove it. It measures, on this machine and a sample of
// the dataset:
//   decode   images/s one core delivers through the pipeline (the training
//            transform, later-epoch reads) for the dataset as stored and
//            for each decode-cheap form (`dataset pack --image-form`):
//            the sample is packed into each form in memory and read back
//   bytes    bytes per image of each form (as stored: the whole dataset's
//            mean; the forms: the sample's, scaled by nothing)
//   storage  MB/s read from --storage (default: the dataset itself) by
//            `bench storage`'s readers, or a figure given
// and takes the GPUs' demand from the model table (docs/models.md):
//   demand images/s = GPUs x the model's images/s per GPU
//   cores needed    = demand / decode images/s per core
//   MB/s per GPU    = the model's images/s per GPU x bytes per image
//   nodes           = `aquifer size` with that MB/s per GPU
// Each decode rate is the median of a few runs; when the runs disagree by
// more than `noisy`, the report says so (another process sharing the
// cores moved the figure) and names the rounds.
// The limit of each form is the smallest of GPU (1), cores / cores needed
// and storage MB/s / demand MB/s; the doctor picks the form that lets the
// GPUs run at full speed with the fewest bytes (else the fastest one), and
// prints every figure and assumption it used.
//
// Thread safety: one call at a time per file system.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "io/file_system.h"

namespace aq::bench {

struct DoctorOptions {
  std::string data;
  std::string storage;               // where storage MB/s is measured (default: data)
  double storage_mb_per_second = 0;  // > 0: this figure instead of a measurement
  double storage_seconds = 4;
  std::string model = "resnet50", gpu = "a100", precision = "fp16";
  double gpus = 8;
  double cores = 0;                // cores that decode for those GPUs (0: this machine's)
  std::string node = "f800";       // node profile for node counts (aquifer size)
  size_t sample = 256;             // images packed into each form
  size_t decoded = 1024;           // images each form's decode rate is measured over (two passes at least)
  size_t rounds = 3;               // each form's decode rate: the median of this many runs
  double min_round_seconds = 0.3;  // each run lasts this long at least (repeating its passes)
  double noisy = 0.25;             // a spread of the runs ((max - min) / median) above this is reported
  uint32_t max_side = 256;         // the forms' longer side
  int quality = 90;                // reencode's JPEG quality
  uint64_t raw_max_pixels = 256 * 256;
  bool progress = true;
};

struct DoctorForm {
  std::string form;        // "as stored", "reencode", "raw", "auto"
  std::string pack_flags;  // how to make it with dataset pack
  double bytes_per_image = 0;
  double images_per_second_per_core = 0;  // the median of the rounds
  std::vector<double> decode_rounds;      // images/s per core of each round
  double decode_spread = 0;               // (max - min) / median of the rounds
  double cores_needed = 0;
  double mb_per_second_per_gpu = 0;
  double demand_mb_per_second = 0;
  int nodes = 0;                // node-profile nodes for that demand
  double cpu_fraction = 0;      // cores / cores needed
  double storage_fraction = 0;  // storage MB/s / demand (0 when storage is unknown)
  double gpu_utilisation = 0;   // what the GPUs can reach: min(1, cpu, storage)
  std::string limit;            // "gpu", "cpu decode", "storage"
};

struct DoctorReport {
  std::string data, format;
  uint64_t images = 0, dataset_bytes = 0;
  double model_images_per_second_per_gpu = 0;
  std::string model_source;
  double demand_images_per_second = 0;
  double cores = 0;
  double storage_mb_per_second = 0;
  std::string storage_source;
  std::vector<DoctorForm> forms;
  size_t pick = 0;  // index into forms
  std::string verdict;
  std::vector<std::string> assumptions;
  std::vector<std::string> warnings;  // figures not to trust as they stand (a noisy decode rate)
};

Result<DoctorReport> RunDoctor(io::FileSystem& fs, const DoctorOptions& options);
nlohmann::json ToJson(const DoctorReport& report);

}  // namespace aq::bench
