// aquifer dataset inspect: records as rows (where, key, label, sizes, image
// dimensions), for people (a table) and scripts (JSON).
#include <fmt/format.h>

#include "common/crc32c.h"
#include "dataset/commands.h"
#include "image/decode.h"
#include "image/jpeg.h"

namespace aq::dataset {

Result<std::vector<InspectRow>> Inspect(io::FileSystem& fs, const InspectOptions& o) {
  format::FolderScanOptions scan;
  scan.allow_empty_classes = o.allow_empty_classes;
  DatasetFiles ds = AQ_TRY(FindDataset(fs, o.path, o.format, scan));
  const format::WdsSchema wds = AQ_TRY(format::ParseWdsSchema(o.wds_image, o.wds_label));
  std::vector<InspectRow> rows;
  const bool folder = ds.format == Format::kFolder;
  for (size_t i = 0; i < ds.files.size(); ++i) {
    if (o.limit != 0 && rows.size() >= o.limit) break;
    WalkOptions wo;
    wo.wds = wds;
    wo.start_record = folder ? 0 : o.start;
    wo.limit = o.limit == 0 ? 0 : o.limit - rows.size();
    if (folder && i < o.start) continue;
    auto walked = WalkFile(fs, ds.format, ds.files[i], wo, [&](const Sample& s) -> Status {
      InspectRow r;
      r.file = *s.file;
      r.record = folder ? i : s.record;
      r.offset = s.offset;
      r.size = s.framed_size;
      r.key = folder ? std::string(io::BaseName(s.key)) : s.key;
      r.label = folder ? ds.folder.images[i].class_index : s.label;
      r.image_bytes = s.image.size();
      r.image_crc32c = crc32c::Value(s.image);
      if (!s.parse_error.ok()) r.error = s.parse_error.message();
      if (s.image.empty() && r.error.empty()) r.error = "no image bytes (an empty file or member)";
      if (o.decode_header && !s.image.empty()) {
        auto info = image::ReadJpegInfo(s.image);
        if (info.ok()) {
          r.width = info->width;
          r.height = info->height;
          r.components = info->components;
          r.image_format = "JPEG";
          r.subsampling = info->subsampling;
          r.progressive = info->progressive;
        } else if (auto other = image::CheckImage(s.image, false); other.ok()) {
          r.width = other->width;
          r.height = other->height;
          r.image_format = std::string(image::ImageFormatName(other->format));
        } else if (r.error.empty()) {
          r.error = info.status().message();
        }
      }
      rows.push_back(std::move(r));
      return Status::Ok();
    });
    // An image that cannot be read (a dangling link, no permission) is a
    // row with its error, as a damaged one is; a record file that cannot
    // be read stops the listing.
    if (!walked.ok()) {
      if (!folder) return walked.status();
      InspectRow r;
      r.file = ds.files[i];
      r.record = i;
      r.key = std::string(io::BaseName(ds.files[i]));
      r.label = ds.folder.images[i].class_index;
      r.error = walked.status().message();
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

}  // namespace aq::dataset
