#include "bench/doctor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/models.h"
#include "bench/sizing.h"
#include "bench/storage_bench.h"
#include "common/progress.h"
#include "common/thread_pool.h"
#include "dataset/commands.h"
#include "dataset/dataset.h"
#include "format/example.h"
#include "format/tfrecord.h"
#include "image/decode.h"
#include "pipeline/catalog.h"
#include "pipeline/pipeline.h"

namespace aq::bench {
namespace {

std::string_view Extension(image::ImageFormat f) {
  switch (f) {
    case image::ImageFormat::kPng: return "png";
    case image::ImageFormat::kGif: return "gif";
    case image::ImageFormat::kBmp: return "bmp";
    case image::ImageFormat::kWebp: return "webp";
    case image::ImageFormat::kTiff: return "tif";
    case image::ImageFormat::kPnm: return "ppm";
    default: return "jpg";
  }
}

// `n` images spread evenly over the dataset, as stored.
Result<std::vector<std::string>> SampleImages(io::FileSystem& fs, const std::string& data, const pipeline::Catalog& cat,
                                              size_t n) {
  std::vector<std::string> images;
  const size_t total = cat.samples.size();
  n = std::min(n, total);
  for (size_t k = 0; k < n; ++k) {
    const pipeline::SampleRef& ref = cat.samples[k * total / n];
    dataset::WalkOptions wo;
    wo.start_record = ref.record;
    wo.limit = 1;
    std::string image;
    AQ_TRY(dataset::WalkFile(fs, cat.format, cat.files[ref.file], wo, [&](const dataset::Sample& s) {
      image.assign(s.image);
      return Status::Ok();
    }));
    if (image.empty())
      return Corruption(fmt::format("doctor: no image in record {} of '{}'", ref.record, cat.files[ref.file]));
    images.push_back(std::move(image));
  }
  if (images.empty()) return InvalidArgument(fmt::format("doctor: no images in '{}'", data));
  return images;
}

struct Decoded {
  double images = 0, seconds = 0;
};

// Images one decode thread delivers over `data` (in `fs`) and the seconds
// it took: training crops, later-epoch reads (each file only as far as its crop).
Result<Decoded> DecodeRate(io::FileSystem& fs, const std::string& data, size_t images, size_t decoded, int image_size) {
  pipeline::PipelineOptions o;
  o.data = data;
  o.batch_size = static_cast<uint32_t>(std::min<size_t>(32, images));
  o.image_size = image_size;
  o.workers = 1;
  o.damage_check = false;
  o.epochs = static_cast<uint32_t>(std::max<size_t>(2, (decoded + images - 1) / images));
  o.shuffle_buffer = 64;
  auto p = AQ_TRY(pipeline::Pipeline::Create(fs, o));
  while (AQ_TRY(p->Next()) != nullptr) {
  }
  const pipeline::PipelineStats st = p->Stats();
  if (st.bad_samples > 0 && !st.problems.empty()) {
    return Corruption(fmt::format("doctor: sample '{}' has damaged images: {}", data, st.problems[0].message));
  }
  return Decoded{static_cast<double>(st.images), st.elapsed_seconds};
}

// Each form's decode rate, as the median of `o.rounds` runs. The rounds go
// over every form in turn (form 1, 2, 3, 4, then 1, 2, ...), so that a
// slower spell of the machine falls on all of them rather than on one;
// each run covers half the images `o.decoded` asks for (two passes of the
// sample at least) and lasts `o.min_round_seconds` at least: a fast form's
// runs would otherwise last a few scheduler slices and differ by that much.
Status MeasureDecode(io::FileSystem& fs, const std::vector<std::string>& data, size_t images, const DoctorOptions& o,
                     int image_size, std::vector<DoctorForm>& forms, Progress& progress) {
  const size_t rounds = std::max<size_t>(1, o.rounds);
  const size_t each = std::max<size_t>(2 * images, o.decoded / 2);
  for (auto& f : forms) f.decode_rounds.clear();
  for (size_t i = 0; i < rounds; ++i) {
    for (size_t k = 0; k < forms.size(); ++k) {
      Decoded round;
      do {
        const Decoded d = AQ_TRY(DecodeRate(fs, data[k], images, each, image_size));
        if (d.images <= 0) return Corruption(fmt::format("doctor: no image of the {} form decoded", forms[k].form));
        round.images += d.images;
        round.seconds += d.seconds;
      } while (round.seconds < o.min_round_seconds);
      forms[k].decode_rounds.push_back(round.images / std::max(1e-9, round.seconds));
    }
    progress.Add(1, 0);
  }
  for (auto& f : forms) {
    std::vector<double> sorted = f.decode_rounds;
    std::sort(sorted.begin(), sorted.end());
    const double median = rounds % 2 ? sorted[rounds / 2] : (sorted[rounds / 2 - 1] + sorted[rounds / 2]) / 2;
    f.images_per_second_per_core = median;
    f.decode_spread = median > 0 ? (sorted.back() - sorted.front()) / median : 0;
  }
  return Status::Ok();
}

struct Sampled {
  std::string data;  // in the memory file system
  double bytes_per_image = 0;
};

// The sample as stored: one TFRecord shard of the original bytes.
Result<Sampled> AsStored(io::FileSystem& mem, const std::vector<std::string>& images) {
  std::string shard;
  for (const auto& img : images) {
    format::ImageRecord r;
    r.encoded = img;
    r.label = 1;
    format::AppendTFRecord(format::SerializeExample(format::ToExample(r)), &shard);
  }
  AQ_TRY(io::WriteFileAtomic(mem, "/stored/train-00000-of-00001", shard));
  return Sampled{"/stored", 0};
}

// The sample packed in one form, by `dataset pack` itself.
Result<Sampled> InForm(io::FileSystem& mem, const DoctorOptions& o, dataset::ImageForm form) {
  dataset::PackOptions p;
  p.input = "/folder";
  p.out = fmt::format("/{}", dataset::ImageFormName(form));
  p.shards = 1;
  p.form = form;
  p.max_side = o.max_side;
  p.quality = o.quality;
  p.raw_max_pixels = o.raw_max_pixels;
  p.decode_check = false;
  p.common.progress = false;
  p.common.threads = 1;
  auto r = AQ_TRY(dataset::Pack(mem, p));
  // Image bytes, not the framing: read back through the walker.
  uint64_t bytes = 0, n = 0;
  for (const auto& f : r.files) {
    AQ_TRY(dataset::WalkFile(mem, dataset::Format::kTFRecord, f, {}, [&](const dataset::Sample& s) {
      bytes += s.image.size();
      ++n;
      return Status::Ok();
    }));
  }
  return Sampled{p.out, n ? static_cast<double>(bytes) / static_cast<double>(n) : 0};
}

void Judge(DoctorForm& f, const DoctorReport& r, const DoctorOptions& o, double rate_per_gpu) {
  f.cores_needed = r.demand_images_per_second / std::max(1e-9, f.images_per_second_per_core);
  f.mb_per_second_per_gpu = rate_per_gpu * f.bytes_per_image / 1e6;
  f.demand_mb_per_second = f.mb_per_second_per_gpu * o.gpus;
  SizeRequest sr;
  sr.gpus = o.gpus;
  sr.node = o.node;
  sr.mb_per_second_per_gpu = f.mb_per_second_per_gpu;
  if (auto a = Size(sr); a.ok()) f.nodes = a->nodes;
  f.cpu_fraction = r.cores / std::max(1e-9, f.cores_needed);
  f.storage_fraction = r.storage_mb_per_second > 0 ? r.storage_mb_per_second / f.demand_mb_per_second : 0;
  f.gpu_utilisation = std::min(1.0, f.cpu_fraction);
  f.limit = f.cpu_fraction < 1 ? "cpu decode" : "gpu";
  if (r.storage_mb_per_second > 0 && f.storage_fraction < std::min(1.0, f.cpu_fraction)) {
    f.gpu_utilisation = f.storage_fraction;
    f.limit = "storage";
  }
}

// The form as stored when it already keeps the GPUs fully fed (fewer
// pixels are not free: a form caps the side); else the form that does
// with the fewest bytes per image; when none does, the one that gets the
// GPUs furthest.
size_t Pick(const std::vector<DoctorForm>& forms) {
  if (forms[0].gpu_utilisation >= 1) return 0;
  size_t best = 0;
  for (size_t i = 1; i < forms.size(); ++i) {
    const DoctorForm &a = forms[i], &b = forms[best];
    const bool a_full = a.gpu_utilisation >= 1, b_full = b.gpu_utilisation >= 1;
    if (a_full != b_full ? a_full
                         : (a_full ? a.bytes_per_image < b.bytes_per_image : a.gpu_utilisation > b.gpu_utilisation)) {
      best = i;
    }
  }
  return best;
}

std::string Verdict(const DoctorReport& r, const DoctorOptions& o) {
  const DoctorForm& now = r.forms[0];
  const DoctorForm& pick = r.forms[r.pick];
  std::string s;
  if (now.limit == "gpu") {
    s = fmt::format("as stored, the GPUs are the limit: {:.0f} cores decode what {} GPUs need ({:.1f} needed)", r.cores,
                    o.gpus, now.cores_needed);
  } else if (now.limit == "cpu decode") {
    s = fmt::format(
        "as stored, CPU decode limits training: {:.0f} cores deliver {:.0f}% of the {:.0f} images/s the GPUs "
        "need ({:.1f} cores needed)",
        r.cores, 100 * now.gpu_utilisation, r.demand_images_per_second, now.cores_needed);
  } else {
    s = fmt::format("as stored, storage limits training: {:.0f} MB/s of the {:.0f} MB/s the GPUs need",
                    r.storage_mb_per_second, now.demand_mb_per_second);
  }
  if (r.pick != 0) {
    s += fmt::format("; the {} form ({}) needs {:.1f} cores and {:.1f} MB/s per GPU", pick.form, pick.pack_flags,
                     pick.cores_needed, pick.mb_per_second_per_gpu);
    if (pick.cpu_fraction < 1) s += fmt::format(", still CPU-bound here ({:.0f}%)", 100 * pick.gpu_utilisation);
  } else {
    s += "; keep the form as stored";
    size_t fewest = 0;
    for (size_t i = 1; i < r.forms.size(); ++i) {
      if (r.forms[i].bytes_per_image < r.forms[fewest].bytes_per_image) fewest = i;
    }
    if (fewest != 0) {
      s += fmt::format(" (the {} form would need {:.1f} cores and {:.1f} MB/s per GPU, at --max-side {})",
                       r.forms[fewest].form, r.forms[fewest].cores_needed, r.forms[fewest].mb_per_second_per_gpu,
                       o.max_side);
    }
  }
  if (pick.limit == "storage" || (r.storage_mb_per_second <= 0 && pick.nodes > 0)) {
    s += fmt::format("; storage: {} {} node(s) for {:.0f} MB/s", pick.nodes, o.node, pick.demand_mb_per_second);
  }
  return s;
}

}  // namespace

Result<DoctorReport> RunDoctor(io::FileSystem& fs, const DoctorOptions& o) {
  if (o.gpus <= 0) return InvalidArgument("doctor: --gpus must be positive");
  if (o.sample < 8) return InvalidArgument("doctor: --sample must be at least 8 images");
  const ModelEntry model = AQ_TRY(FindModel(o.model, o.gpu, o.precision));
  AQ_TRY(FindNode(o.node));
  DoctorReport r;
  r.data = o.data;
  r.model_images_per_second_per_gpu = model.train_images_per_second;
  r.model_source = model.source;
  r.demand_images_per_second = o.gpus * model.train_images_per_second;
  r.cores = o.cores > 0 ? o.cores : static_cast<double>(HardwareThreads());

  const pipeline::Catalog cat = AQ_TRY(pipeline::BuildCatalog(fs, o.data));
  r.format = std::string(dataset::FormatName(cat.format));
  r.images = cat.samples.size();
  r.dataset_bytes = cat.total_bytes;
  Progress progress({"doctor", 5 + std::max<size_t>(1, o.rounds), 0, "steps", o.progress});
  const std::vector<std::string> images = AQ_TRY(SampleImages(fs, o.data, cat, o.sample));
  progress.Add(1, 0);

  auto mem = io::NewMemFileSystem();
  double stored_sample_bytes = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    stored_sample_bytes += static_cast<double>(images[i].size());
    AQ_TRY(io::WriteFileAtomic(
        *mem, fmt::format("/folder/c/{:06}.{}", i, Extension(image::SniffImageFormat(images[i]))), images[i]));
  }
  DoctorForm stored;
  stored.form = "as stored";
  stored.pack_flags = "no repack";
  stored.bytes_per_image = static_cast<double>(cat.total_bytes) / static_cast<double>(std::max<size_t>(1, r.images));
  const Sampled s0 = AQ_TRY(AsStored(*mem, images));
  std::vector<std::string> sampled = {s0.data};
  r.forms.push_back(stored);
  for (dataset::ImageForm form : {dataset::ImageForm::kReencode, dataset::ImageForm::kRaw, dataset::ImageForm::kAuto}) {
    const Sampled s = AQ_TRY(InForm(*mem, o, form));
    DoctorForm f;
    f.form = std::string(dataset::ImageFormName(form));
    f.pack_flags = fmt::format("--image-form {} --max-side {}", f.form, o.max_side);
    if (form != dataset::ImageForm::kRaw) f.pack_flags += fmt::format(" --quality {}", o.quality);
    if (form == dataset::ImageForm::kAuto) f.pack_flags += fmt::format(" --raw-max-pixels {}", o.raw_max_pixels);
    f.bytes_per_image = s.bytes_per_image;
    sampled.push_back(s.data);
    r.forms.push_back(f);
    progress.Add(1, 0);
  }
  AQ_TRY(MeasureDecode(*mem, sampled, images.size(), o, model.image_size, r.forms, progress));

  if (o.storage_mb_per_second > 0) {
    r.storage_mb_per_second = o.storage_mb_per_second;
    r.storage_source = "given (--storage-mbps)";
  } else {
    StorageBenchOptions so;
    so.data = o.storage.empty() ? o.data : o.storage;
    so.duration_seconds = o.storage_seconds;
    so.ramp_seconds = std::min(1.0, o.storage_seconds / 4);
    so.progress = false;
    auto sr = RunStorageBench(fs, so);
    if (sr.ok()) {
      r.storage_mb_per_second = sr->mb_per_second;
      r.storage_source = fmt::format(
          "measured: {} readers of 1 MiB requests on '{}' for {:.0f} s ({:.0f}% of the files in the page cache before; "
          "a figure from the page cache overstates the storage)",
          so.readers, so.data, so.duration_seconds, 100 * sr->page_cache_before);
    } else {
      r.storage_source = fmt::format("not measured ({}); give --storage-mbps", sr.status().message());
    }
  }
  progress.Add(1, 0);
  progress.Finish();

  for (auto& f : r.forms) Judge(f, r, o, model.train_images_per_second);
  for (const auto& f : r.forms) {
    if (f.decode_rounds.size() < 2 || f.decode_spread <= o.noisy) continue;
    std::string runs;
    for (double v : f.decode_rounds) runs += fmt::format("{}{:.0f}", runs.empty() ? "" : ", ", v);
    r.warnings.push_back(fmt::format(
        "{}: the decode rate is noisy: its {} runs gave {} images/s per core ({:.0f}% apart), so the machine's "
        "speed changed meanwhile (another process, or shared virtual CPUs). Rerun on an idle machine, or with more "
        "--rounds",
        f.form, f.decode_rounds.size(), runs, 100 * f.decode_spread));
  }
  r.pick = Pick(r.forms);
  r.verdict = Verdict(r, o);
  r.assumptions = {
      fmt::format("GPU demand: {} x {:.0f} images/s ({} {} {}, {})", o.gpus, model.train_images_per_second, o.model,
                  o.gpu, o.precision, model.source),
      fmt::format("decode: measured on this machine, one pipeline thread per core, {} images sampled evenly from the "
                  "dataset, training crops at {} px (RandomResizedCrop + flip, fp32), later-epoch reads (a first epoch "
                  "of an unverified dataset also reads every JPEG to its end; `dataset verify --decode` removes that); "
                  "the median of {} runs per form",
                  images.size(), model.image_size, std::max<size_t>(1, o.rounds)),
      fmt::format("cores: {:.0f} decode for the {} GPUs ({})", r.cores, o.gpus,
                  o.cores > 0 ? "given" : "this machine's; give --cores for the training host's"),
      fmt::format("bytes per image: as stored, the dataset's mean ({} records, framing included); the forms, the "
                  "sample's mean packed with dataset pack (image bytes)",
                  r.images),
      fmt::format("storage: {}", r.storage_source),
      fmt::format("nodes: aquifer size with each form's MB/s per GPU on the {} profile", o.node),
      fmt::format("forms with --max-side {} store fewer pixels than the originals: check the model's accuracy on them "
                  "before switching",
                  o.max_side)};
  return r;
}

nlohmann::json ToJson(const DoctorReport& r) {
  nlohmann::json forms = nlohmann::json::array();
  for (const auto& f : r.forms) {
    forms.push_back({{"form", f.form},
                     {"pack_flags", f.pack_flags},
                     {"bytes_per_image", f.bytes_per_image},
                     {"images_per_second_per_core", f.images_per_second_per_core},
                     {"decode_rounds", f.decode_rounds},
                     {"decode_spread", f.decode_spread},
                     {"cores_needed", f.cores_needed},
                     {"mb_per_second_per_gpu", f.mb_per_second_per_gpu},
                     {"demand_mb_per_second", f.demand_mb_per_second},
                     {"nodes", f.nodes},
                     {"cpu_fraction", f.cpu_fraction},
                     {"storage_fraction", f.storage_fraction},
                     {"gpu_utilisation", f.gpu_utilisation},
                     {"limit", f.limit}});
  }
  return {{"data", r.data},
          {"format", r.format},
          {"images", r.images},
          {"dataset_bytes", r.dataset_bytes},
          {"model_images_per_second_per_gpu", r.model_images_per_second_per_gpu},
          {"demand_images_per_second", r.demand_images_per_second},
          {"cores", r.cores},
          {"storage_mb_per_second", r.storage_mb_per_second},
          {"storage_source", r.storage_source},
          {"forms", forms},
          {"pick", r.forms.empty() ? "" : r.forms[r.pick].form},
          {"limit", r.forms.empty() ? "" : r.forms[0].limit},
          {"verdict", r.verdict},
          {"assumptions", r.assumptions},
          {"warnings", r.warnings}};
}

}  // namespace aq::bench
