// aquifer dataset expand: the documents' large-dataset method. Every record
// file is copied N times under a "-copy-NNN" name, so a dataset that fits in
// a cache becomes one that does not while its access pattern stays the same
// (readers shuffle files). Copies share extents (reflink) where the file
// system allows, else use copy_file_range, else read/write.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "common/progress.h"
#include "common/thread_pool.h"
#include "common/units.h"
#include "dataset/commands.h"
#include "format/manifest.h"

namespace aq::dataset {

std::string CopyName(std::string_view name, uint32_t copy) {
  std::string suffix = fmt::format("-copy-{:03d}", copy);
  for (std::string_view ext : {".tar.idx", ".tar", ".rec", ".idx", ".lst"}) {
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) {
      return std::string(name.substr(0, name.size() - ext.size())) + suffix + std::string(ext);
    }
  }
  return std::string(name) + suffix;
}

// Copies are byte for byte: the input's verification manifest vouches for
// them as for their originals (a copy that differs fails its CRCs and is
// checked, as any changed file is).
Status VouchForCopies(io::FileSystem& fs, const std::string& input, const std::string& out,
                      const std::vector<std::string>& files, uint32_t copies, ExpandReport& rep) {
  const std::string from = format::ManifestPath(input, false), to = format::ManifestPath(out, false);
  auto m = format::ReadManifest(fs, from);
  if (!m.ok() || !m->has_value() || (*m)->damage_rules != format::kDamageRules) return Status::Ok();
  std::map<std::string, format::ManifestFile> entries;
  for (const auto& f : files) {
    if (f.find("-copy-") != std::string::npos) continue;
    auto it = (*m)->files.find(format::ManifestName(from, f));
    if (it == (*m)->files.end()) continue;
    for (uint32_t c = 0; c < copies; ++c) {
      entries[format::ManifestName(to, io::JoinPath(out, CopyName(io::BaseName(f), c)))] = it->second;
    }
  }
  if (entries.empty()) return Status::Ok();
  rep.manifest_entries = entries.size();
  AQ_TRY(format::UpdateManifest(fs, to, "dataset expand (byte copies of verified files)", std::move(entries)));
  rep.manifest = to;
  return Status::Ok();
}

Result<ExpandReport> Expand(io::FileSystem& fs, const ExpandOptions& o) {
  if (o.copies == 0) return InvalidArgument("expand: at least 1 copy");
  const auto t0 = std::chrono::steady_clock::now();
  DatasetFiles ds = AQ_TRY(FindDataset(fs, o.input));
  if (ds.format == Format::kFolder) {
    return InvalidArgument(fmt::format("expand: '{}' is an image folder; pack it into record files first", o.input));
  }
  const std::string out = o.out.empty() ? o.input : o.out;
  AQ_TRY(fs.MakeDirs(out));

  // (source, destination) pairs: each record file and its index files.
  struct Job {
    std::string from, to;
    uint64_t size;
  };
  std::vector<Job> jobs;
  uint64_t total = 0;
  auto add = [&](const std::string& from, const std::string& to_dir, uint32_t c) -> Status {
    auto st = fs.Stat(from);
    if (!st.ok()) return Status::Ok();  // optional companion file absent
    jobs.push_back({from, io::JoinPath(to_dir, CopyName(io::BaseName(from), c)), st->size});
    total += st->size;
    return Status::Ok();
  };
  for (const auto& f : ds.files) {
    if (f.find("-copy-") != std::string::npos) continue;  // never copy copies
    for (uint32_t c = 0; c < o.copies; ++c) {
      AQ_TRY(add(f, out, c));
      if (ds.format == Format::kTFRecord || ds.format == Format::kWebDataset) {
        AQ_TRY(add(TFRecordIndexPath(f), io::JoinPath(out, "idx"), c));
      } else {
        AQ_TRY(add(RecordIOIndexPath(f), out, c));
        AQ_TRY(add(f.substr(0, f.size() - 4) + ".lst", out, c));
      }
    }
  }
  if (ds.format == Format::kTFRecord || ds.format == Format::kWebDataset) {
    AQ_TRY(fs.MakeDirs(io::JoinPath(out, "idx")));
  }

  // Room for the copies, unless they share extents (reflink): one copy,
  // the smallest, shows which way they go.
  auto free_bytes = fs.FreeBytes(out);
  if (free_bytes.ok() && total > *free_bytes && !jobs.empty()) {
    const auto smallest = std::min_element(jobs.begin(), jobs.end(), [](auto& a, auto& b) { return a.size < b.size; });
    auto probe = fs.Copy(smallest->from, smallest->to);
    const bool shares = probe.ok() && *probe == io::CopyMethod::kReflink;
    if (!shares) {
      (void)fs.Remove(smallest->to);
      return Status(StatusCode::kNoSpace,
                    fmt::format("expand: {} copies of '{}' need {} and '{}' has {} free{}; copy to another place "
                                "(--out) or make fewer copies (--copies)",
                                o.copies, o.input, units::Bytes(static_cast<double>(total)), out,
                                units::Bytes(static_cast<double>(*free_bytes)),
                                probe.ok() ? " (its file system cannot share extents between copies)" : ""));
    }
  }

  ExpandReport rep;
  std::mutex mu;  // guards rep.methods
  std::atomic<uint64_t> bytes{0};
  Progress progress({"expand", jobs.size(), total, "files", o.common.progress});
  AQ_TRY(ParallelFor(jobs.size(), o.common.threads, [&](size_t i) -> Status {
    const Job& j = jobs[i];
    io::CopyMethod m = AQ_TRY(fs.Copy(j.from, j.to));
    bytes += j.size;
    progress.Add(1, j.size);
    std::lock_guard<std::mutex> lock(mu);
    rep.methods[std::string(io::CopyMethodName(m))] += 1;
    return Status::Ok();
  }));
  progress.Finish();
  AQ_TRY(VouchForCopies(fs, o.input, out, ds.files, o.copies, rep));
  rep.files = jobs.size();
  rep.bytes = bytes;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace aq::dataset
