// aquifer dataset synth | pack | expand | resize | verify | inspect
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "cli/cli.h"
#include "common/units.h"
#include "dataset/commands.h"
#include "format/json_text.h"

namespace aq::cli {
namespace {

// What the library refuses to replace, a flag allows: say which.
Status OverwriteHint(const Status& s) {
  if (s.code() != StatusCode::kAlreadyExists) return s;
  return Status(s.code(), s.subject(), s.message() + "; pass --overwrite to replace it");
}

using dataset::Format;

void PrintJson(const nlohmann::json& j) { std::cout << format::DumpJson(j, 2) << std::endl; }

// Records or images left out, the first 20 of them, and how many more.
void PrintSkipped(const std::vector<format::SkippedRecord>& skipped, bool images, std::string_view label = "skipped") {
  if (skipped.empty()) return;
  std::printf("  %-10s %zu\n", std::string(label).c_str(), skipped.size());
  constexpr size_t kListed = 20;
  for (size_t i = 0; i < skipped.size() && i < kListed; ++i) {
    const auto& s = skipped[i];
    if (images) {
      std::printf("    %s: %s\n", s.file.c_str(), s.reason.c_str());
    } else {
      std::printf("    %s: record %llu at offset %llu: %s\n", s.file.c_str(), static_cast<unsigned long long>(s.record),
                  static_cast<unsigned long long>(s.offset), s.reason.c_str());
    }
  }
  if (skipped.size() > kListed) std::printf("    ... and %zu more (--json lists all)\n", skipped.size() - kListed);
}

// A damaged image stopped the run: say how to go on without it.
Status OnErrorHint(const Status& s, format::ErrorPolicy policy, std::string_view what) {
  if (policy != format::ErrorPolicy::kFail) return s;
  const StatusCode c = s.code();
  if (c != StatusCode::kCorruption && c != StatusCode::kTruncated && c != StatusCode::kUnsupported) return s;
  return Status(c, s.subject(), fmt::format("{}; pass --on-error skip to {}", s.message(), what));
}

// An option that parses its text into an enum, with a clear usage error
// (exit 2) naming the accepted values when the text is wrong.
template <typename T>
CLI::Option* AddEnum(CLI::App* cmd, const std::string& name, T* out, Result<T> (*parse)(std::string_view),
                     const std::string& default_text, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          name,
          [name, out, parse](const std::string& s) {
            auto r = parse(s);
            if (!r.ok()) throw CLI::ValidationError(name, r.status().message());
            *out = *r;
          },
          help)
      ->default_str(default_text);
}

void AddSynth(CLI::App* group, Globals& g) {
  auto* o = g.Own<dataset::SynthOptions>();
  auto* cmd = group->add_subcommand("synth", "Make a synthetic ImageNet-like image folder (root/<class>/<image>.JPEG)");
  cmd->add_option("-o,--out", o->out, "Output directory")->required();
  cmd->add_option("--classes", o->classes, "Number of classes")->capture_default_str();
  cmd->add_option("--images", o->images, "Number of images in all")->capture_default_str();
  AddEnum(cmd, "--profile", &o->profile, &dataset::ParseSizeProfile, "small",
          "Image size profile: tiny (~160x120, q90), small (~500x375, ~110 KB) or large (~1500x1125, q100, ~1.3 MB)");
  cmd->add_flag("--learnable", o->learnable,
                "Images a small network can learn: a class-specific shape and colour on a random background "
                "(for end-to-end training checks)");
  cmd->add_option("--seed", o->seed, "Random seed (same seed, same files)")->capture_default_str();
  cmd->add_option("--quality", o->quality, "JPEG quality (default: the profile's, 95 or 100)");
  cmd->add_flag("--overwrite", o->overwrite, "Write into a non-empty output directory");
  AddOutputFlags(cmd, g);
  cmd->callback([o, &g] {
    o->common = {g.threads, !g.no_progress};
    auto r = dataset::Synthesize(*g.fs, *o);
    if (!r.ok()) return Fail(g, OverwriteHint(r.status()));
    if (g.json) return PrintJson(dataset::ToJson(*r));
    std::printf("synth: %llu images in %u classes -> %s\n", static_cast<unsigned long long>(r->images), r->classes,
                r->out.c_str());
    std::printf("  bytes      %s (avg %s per image)\n", units::Bytes(static_cast<double>(r->bytes)).c_str(),
                units::Bytes(static_cast<double>(r->bytes) / static_cast<double>(r->images)).c_str());
    std::printf("  time       %s (%.1f images/s)\n", units::Duration(r->seconds).c_str(),
                static_cast<double>(r->images) / r->seconds);
  });
}

// pack's report: what was packed, converted, left out and warned about.
void PrintPackResult(const dataset::PackReport& r, const dataset::PackOptions& o) {
  std::printf("pack: %llu of %llu images, %llu classes -> %zu %s file(s) in %s\n",
              static_cast<unsigned long long>(r.images), static_cast<unsigned long long>(r.found),
              static_cast<unsigned long long>(r.classes), r.files.size(),
              std::string(dataset::FormatName(r.format)).c_str(), r.out.c_str());
  std::printf("  bytes      %s in, %s out\n", units::Bytes(static_cast<double>(r.bytes_in)).c_str(),
              units::Bytes(static_cast<double>(r.bytes_out)).c_str());
  std::printf("  time       %s (%s)\n", units::Duration(r.seconds).c_str(),
              units::Rate(static_cast<double>(r.bytes_in) / r.seconds).c_str());
  if (!r.converted.empty()) {
    std::printf("  converted  %zu to JPEG (quality 100, 4:4:4)\n", r.converted.size());
    for (size_t i = 0; i < r.converted.size() && i < 20; ++i) {
      const auto& c = r.converted[i];
      std::printf("    %s: %s, %s -> %s\n", c.file.c_str(), c.from.c_str(),
                  units::Bytes(static_cast<double>(c.bytes_in)).c_str(),
                  units::Bytes(static_cast<double>(c.bytes_out)).c_str());
    }
    if (r.converted.size() > 20) std::printf("    ... and %zu more (--json lists all)\n", r.converted.size() - 20);
  }
  PrintSkipped(r.skipped, true, "left out");
  if (r.reencoded + r.raw > 0) {
    std::printf("  form       %llu re-encoded (quality %d), %llu raw; longer side at most %s\n",
                static_cast<unsigned long long>(r.reencoded), o.quality, static_cast<unsigned long long>(r.raw),
                o.max_side > 0 ? std::to_string(o.max_side).c_str() : "as stored");
  }
  if (!r.warnings.empty()) {
    std::printf("  warnings   %zu image(s) packed whole despite a decoder warning\n", r.warnings.size());
    for (size_t i = 0; i < r.warnings.size() && i < 10; ++i) {
      std::printf("    %s: %s\n", r.warnings[i].path.c_str(), r.warnings[i].reason.c_str());
    }
    if (r.warnings.size() > 10) std::printf("    ... and %zu more (--json lists all)\n", r.warnings.size() - 10);
  }
  if (!r.ignored.empty()) {
    std::printf("  ignored    %zu file(s) not taken as images\n", r.ignored.size());
    for (size_t i = 0; i < r.ignored.size() && i < 10; ++i) {
      std::printf("    %s: %s\n", r.ignored[i].path.c_str(), r.ignored[i].reason.c_str());
    }
    if (r.ignored.size() > 10) std::printf("    ... and %zu more (--json lists all)\n", r.ignored.size() - 10);
  }
  for (const auto& c : r.empty_classes)
    std::printf("  empty      class '%s' kept its label with no image\n", c.c_str());
  std::printf("  manifest   %s (%s)\n", r.manifest.c_str(),
              o.decode_check || o.form != dataset::ImageForm::kJpeg ? "every image verified"
                                                                    : "images not decoded: unverified");
}

void AddPack(CLI::App* group, Globals& g) {
  auto* o = g.Own<dataset::PackOptions>();
  auto* cmd = group->add_subcommand(
      "pack", "Pack an image folder into TFRecord shards, MXNet RecordIO or WebDataset tar shards");
  cmd->add_option("input", o->input, "Image folder (root/<class>/<image>.jpg)")->required();
  cmd->add_option("-o,--out", o->out, "Output directory")->required();
  AddEnum(cmd, "-f,--format", &o->format, &dataset::ParseFormat, "tfrecord",
          "tfrecord (tf.Example, labels 1-based), recordio (.rec/.idx/.lst, labels 0-based) or wds (WebDataset "
          ".tar shards: KEY.jpg, KEY.cls, KEY.meta.json, labels 0-based)");
  cmd->add_option("--sidecar", o->sidecars,
                  "wds: also pack the file beside each image with its stem and this extension (e.g. json, txt) as "
                  "KEY.<ext>; repeat or comma-separate")
      ->delimiter(',');
  cmd->add_option("--shards", o->shards, "Number of output files (default 8 for tfrecord and wds, 1 for recordio)");
  cmd->add_option("--prefix", o->prefix, "Shard name prefix: <prefix>-00000-of-00008")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the shuffled image order")->capture_default_str();
  cmd->add_option("--labels-file", o->labels_file,
                  "Lines 'synset text' for image/class/text (default: <input>/synset_labels.txt if present)");
  cmd->add_flag(
      "--no-index", [o](int64_t) { o->write_index = false; }, "Do not write idx/<shard>.idx (TFRecord)");
  AddEnum(cmd, "--on-error", &o->policy, &format::ParseErrorPolicy, "fail",
          "Images that cannot be packed (damaged, not an image): fail, or skip and list them");
  cmd->add_flag(
      "--no-decode-check", [o](int64_t) { o->decode_check = false; },
      "Read JPEG headers only instead of decoding every image (faster; damage in the image data goes unnoticed)");
  cmd->add_flag(
      "--no-convert", [o](int64_t) { o->convert = false; },
      "Do not re-encode PNG, GIF, BMP, WebP, TIFF and PPM/PGM files as JPEG (quality 100); they then count as "
      "images that cannot be packed");
  cmd->add_flag("--overwrite", o->overwrite, "Replace existing shards");
  cmd->add_option_function<std::string>(
         "--exif-orientation",
         [o](const std::string& v) {
           if (v != "apply" && v != "ignore") throw CLI::ValidationError("--exif-orientation", "apply or ignore");
           o->exif_orientation_apply = v == "apply";
         },
         "JPEGs with an EXIF orientation tag: ignore (pixels as stored, as torchvision reads them) or apply (turned "
         "as exif_transpose does, re-encoded at quality 100 and listed as converted)")
      ->default_str("ignore");
  AddEnum(cmd, "--image-form", &o->form, &dataset::ParseImageForm, "jpeg",
          "What each image is stored as: jpeg (the file as read), reencode (JPEG at --quality), raw (pixels, "
          "binary PPM: no decode to read) or auto (raw up to --raw-max-pixels, else reencode)");
  cmd->add_option("--max-side", o->max_side, "Forms other than jpeg: cap the longer side at N pixels (0: keep)")
      ->capture_default_str();
  cmd->add_option("--quality", o->quality, "JPEG quality of the reencode and auto forms")->capture_default_str();
  cmd->add_option("--raw-max-pixels", o->raw_max_pixels, "auto: store raw the images with at most this many pixels")
      ->capture_default_str();
  cmd->add_flag("--allow-empty-classes", o->allow_empty_classes,
                "A class folder with no image keeps its label (torchvision's allow_empty=True) instead of stopping "
                "the run");
  AddOutputFlags(cmd, g);
  cmd->callback([o, &g] {
    o->common = {g.threads, !g.no_progress};
    auto r = dataset::Pack(*g.fs, *o);
    if (!r.ok()) {
      return Fail(g, OnErrorHint(OverwriteHint(r.status()), o->policy, "pack the other images and list this one"));
    }
    if (g.json) return PrintJson(dataset::ToJson(*r));
    PrintPackResult(*r, *o);
  });
}

void AddExpand(CLI::App* group, Globals& g) {
  auto* o = g.Own<dataset::ExpandOptions>();
  auto* cmd = group->add_subcommand(
      "expand", "Make N copies of every record file (<name>-copy-000 ...), for datasets larger than any cache");
  cmd->add_option("input", o->input, "Directory of TFRecord shards or .rec files")->required();
  cmd->add_option("-n,--copies", o->copies, "Copies of each file")->required();
  cmd->add_option("-o,--out", o->out, "Output directory (default: the input directory)");
  AddOutputFlags(cmd, g);
  cmd->callback([o, &g] {
    o->common = {g.threads, !g.no_progress};
    auto r = dataset::Expand(*g.fs, *o);
    if (!r.ok()) return Fail(g, r.status());
    if (g.json) return PrintJson(dataset::ToJson(*r));
    std::printf("expand: %llu files, %s in %s (%s)\n", static_cast<unsigned long long>(r->files),
                units::Bytes(static_cast<double>(r->bytes)).c_str(), units::Duration(r->seconds).c_str(),
                units::Rate(static_cast<double>(r->bytes) / r->seconds).c_str());
    for (const auto& [m, n] : r->methods)
      std::printf("  %-16s %llu files\n", m.c_str(), static_cast<unsigned long long>(n));
    if (!r->manifest.empty()) {
      std::printf("  manifest   %s: %llu copies listed as verified, as their originals\n", r->manifest.c_str(),
                  static_cast<unsigned long long>(r->manifest_entries));
    }
  });
}

void AddResize(CLI::App* group, Globals& g) {
  auto* o = g.Own<dataset::ResizeOptions>();
  auto* cmd = group->add_subcommand("resize",
                                    "Re-encode every image at a new scale and JPEG quality (records in, records out)");
  cmd->add_option("input", o->input, "Record file, directory of record files, or image folder")->required();
  cmd->add_option("-o,--out", o->out, "Output directory")->required();
  cmd->add_option("--scale", o->scale, "Scale factor for width and height")->capture_default_str();
  cmd->add_option("--quality", o->quality, "JPEG quality of the output")->capture_default_str();
  AddEnum(cmd, "-f,--format", &o->format, &dataset::ParseFormat, "auto",
          "auto, tfrecord, recordio, wds (WebDataset .tar) or folder");
  AddEnum(cmd, "--on-error", &o->policy, &format::ParseErrorPolicy, "fail", "Damaged records or images: fail or skip");
  cmd->add_flag("--overwrite", o->overwrite, "Write into a non-empty output directory");
  AddOutputFlags(cmd, g);
  cmd->callback([o, &g] {
    o->common = {g.threads, !g.no_progress};
    auto r = dataset::Resize(*g.fs, *o);
    if (!r.ok()) {
      return Fail(g, OnErrorHint(OverwriteHint(r.status()), o->policy, "resize the other images and list this one"));
    }
    if (g.json) return PrintJson(dataset::ToJson(*r));
    std::printf("resize: %llu images in %llu files, x%.2f\n", static_cast<unsigned long long>(r->images),
                static_cast<unsigned long long>(r->files), o->scale);
    std::printf(
        "  bytes      %s in, %s out (avg %s per image)\n", units::Bytes(static_cast<double>(r->bytes_in)).c_str(),
        units::Bytes(static_cast<double>(r->bytes_out)).c_str(),
        units::Bytes(r->images ? static_cast<double>(r->bytes_out) / static_cast<double>(r->images) : 0).c_str());
    std::printf("  time       %s (%.1f images/s)\n", units::Duration(r->seconds).c_str(),
                static_cast<double>(r->images) / r->seconds);
    PrintSkipped(r->skipped, o->format == Format::kFolder);
  });
}

// WebDataset's image and label members, named as the webdataset library
// names them.
void AddWdsOptions(CLI::App* cmd, std::string* image, std::string* label) {
  cmd->add_option("--wds-image", *image,
                  "WebDataset: the image member's extensions, in order of preference (whole extensions after the "
                  "key: jpg, v2.jpg, seg.png)")
      ->capture_default_str();
  cmd->add_option("--wds-label", *label,
                  "WebDataset: the label member (cls, v2.cls, json:PATH for a field of KEY.json, or none)")
      ->capture_default_str();
}

void AddAllowEmptyClasses(CLI::App* cmd, bool* allow) {
  cmd->add_flag("--allow-empty-classes", *allow,
                "An image folder's class folder with no image keeps its label (torchvision's allow_empty=True) "
                "instead of stopping");
}

void AddVerify(CLI::App* group, Globals& g) {
  auto* o = g.Own<dataset::VerifyOptions>();
  auto* cmd = group->add_subcommand(
      "verify", "Check every record: framing, CRCs, payload, label, JPEG header, index files. Exit 1 on any problem");
  cmd->add_option("path", o->path, "Record file, directory of record files, or image folder")->required();
  AddEnum(cmd, "-f,--format", &o->format, &dataset::ParseFormat, "auto",
          "auto, tfrecord, recordio, wds (WebDataset .tar) or folder");
  cmd->add_flag("--decode", o->decode, "Decode every JPEG fully, not only its header");
  cmd->add_flag("--fail-fast", o->fail_fast, "Stop at the first damaged file");
  cmd->add_option("--num-classes", o->num_classes, "Check labels are within this many classes");
  cmd->add_option("--max-problems", o->max_problems, "Problems to list (all are counted)")->capture_default_str();
  AddWdsOptions(cmd, &o->wds_image, &o->wds_label);
  AddAllowEmptyClasses(cmd, &o->allow_empty_classes);
  cmd->add_flag(
      "--no-manifest", [o](int64_t) { o->write_manifest = false; },
      "With --decode: do not record the clean records in the dataset's aquifer-manifest.json (which lets the "
      "pipeline skip reading them to their end)");
  AddOutputFlags(cmd, g);
  cmd->callback([o, &g] {
    o->common = {g.threads, !g.no_progress};
    auto r = dataset::Verify(*g.fs, *o);
    if (!r.ok()) return Fail(g, r.status());
    if (!r->ok()) g.exit_code = 1;
    if (g.json) return PrintJson(dataset::ToJson(*r));
    std::printf("verify: %s (%s)\n", r->path.c_str(), std::string(dataset::FormatName(r->format)).c_str());
    std::printf("  files      %llu\n", static_cast<unsigned long long>(r->files));
    std::printf("  records    %llu\n", static_cast<unsigned long long>(r->records));
    std::printf("  read       %s in %s (%s)\n", units::Bytes(static_cast<double>(r->bytes)).c_str(),
                units::Duration(r->seconds).c_str(), units::Rate(static_cast<double>(r->bytes) / r->seconds).c_str());
    if (r->records > 0) {
      std::printf("  images     avg %s\n",
                  units::Bytes(static_cast<double>(r->image_bytes) / static_cast<double>(r->records)).c_str());
    }
    if (!r->labels.empty()) {
      uint64_t lo = UINT64_MAX, hi = 0;
      for (const auto& [l, c] : r->labels) {
        lo = std::min(lo, c);
        hi = std::max(hi, c);
      }
      std::printf("  labels     %zu classes (%lld..%lld), %llu..%llu records per class\n", r->labels.size(),
                  static_cast<long long>(r->labels.begin()->first), static_cast<long long>(r->labels.rbegin()->first),
                  static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi));
      if (!r->label_note.empty()) std::printf("             note: %s\n", r->label_note.c_str());
    }
    std::printf("  problems   %llu\n", static_cast<unsigned long long>(r->problem_count));
    for (const auto& p : r->problems) {
      std::printf("    %s: record %llu at offset %llu: %s\n", p.file.c_str(), static_cast<unsigned long long>(p.record),
                  static_cast<unsigned long long>(p.offset), p.message.c_str());
    }
    if (r->problem_count > r->problems.size()) {
      std::printf("    ... and %llu more (--max-problems raises the number listed)\n",
                  static_cast<unsigned long long>(r->problem_count - r->problems.size()));
    }
    if (!r->manifest.empty()) {
      std::printf("  manifest   %s: %llu records verified clean\n", r->manifest.c_str(),
                  static_cast<unsigned long long>(r->manifest_records));
    } else if (!r->manifest_error.empty()) {
      std::printf("  manifest   not written: %s\n", r->manifest_error.c_str());
    }
    std::printf("%s\n", r->ok() ? "OK" : "DAMAGED");
  });
}

void AddInspect(CLI::App* group, Globals& g) {
  auto* o = g.Own<dataset::InspectOptions>();
  auto* cmd = group->add_subcommand("inspect", "Print records: where, key, label, sizes, image dimensions");
  cmd->add_option("path", o->path, "Record file, directory of record files, or image folder")->required();
  AddEnum(cmd, "-f,--format", &o->format, &dataset::ParseFormat, "auto",
          "auto, tfrecord, recordio, wds (WebDataset .tar) or folder");
  cmd->add_option("--start", o->start, "First record (of each file)")->capture_default_str();
  cmd->add_option("-n,--limit", o->limit, "Records to print (0 = all)")->capture_default_str();
  AddWdsOptions(cmd, &o->wds_image, &o->wds_label);
  AddAllowEmptyClasses(cmd, &o->allow_empty_classes);
  AddOutputFlags(cmd, g, false);
  cmd->callback([o, &g] {
    auto r = dataset::Inspect(*g.fs, *o);
    if (!r.ok()) return Fail(g, r.status());
    if (g.json) return PrintJson(dataset::ToJson(*r));
    std::printf("%-40s %7s %10s %9s %6s %9s %11s %-18s %s\n", "file", "record", "offset", "size", "label", "image",
                "dimensions", "encoding", "key");
    for (const auto& row : *r) {
      std::string dims = row.width ? fmt::format("{}x{}x{}", row.width, row.height, row.components) : "-";
      if (row.width && row.components == 0) dims = fmt::format("{}x{}", row.width, row.height);
      std::string enc = row.image_format.empty() ? "-" : row.image_format;
      if (!row.subsampling.empty()) enc += " " + row.subsampling + (row.progressive ? " prog" : "");
      std::string file(io::BaseName(row.file));
      std::printf("%-40s %7llu %10llu %9llu %6lld %9llu %11s %-18s %s%s%s\n", file.c_str(),
                  static_cast<unsigned long long>(row.record), static_cast<unsigned long long>(row.offset),
                  static_cast<unsigned long long>(row.size), static_cast<long long>(row.label),
                  static_cast<unsigned long long>(row.image_bytes), dims.c_str(), enc.c_str(), row.key.c_str(),
                  row.error.empty() ? "" : "  ERROR: ", row.error.c_str());
    }
  });
}

}  // namespace

void RegisterDatasetCommands(CLI::App& app, Globals& g) {
  auto* group = app.add_subcommand("dataset", "Make, pack, expand, resize, verify and inspect datasets");
  group->require_subcommand(1);
  AddSynth(group, g);
  AddPack(group, g);
  AddExpand(group, g);
  AddResize(group, g);
  AddVerify(group, g);
  AddInspect(group, g);
}

}  // namespace aq::cli
