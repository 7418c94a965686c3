#include "format/example.h"

#include <fmt/format.h>

#include <cstring>

namespace aq::format {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// A cursor over protobuf wire bytes. Every read is bounds-checked.
class Wire {
 public:
  explicit Wire(std::string_view s) : p_(s.data()), end_(s.data() + s.size()), begin_(s.data()) {}
  bool done() const { return p_ >= end_; }
  size_t pos() const { return static_cast<size_t>(p_ - begin_); }

  Result<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return Error("varint runs past the end");
      auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Error("varint longer than 10 bytes");
  }
  Result<std::string_view> Bytes() {
    uint64_t n = AQ_TRY(Varint());
    if (n > static_cast<uint64_t>(end_ - p_)) {
      return Error(fmt::format("length {} runs past the end ({} bytes left)", n, end_ - p_));
    }
    std::string_view v(p_, n);
    p_ += n;
    return v;
  }
  Result<uint32_t> Fixed32() {
    if (end_ - p_ < 4) return Error("fixed32 runs past the end");
    uint32_t v;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return v;
  }
  Status Skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint: return Varint().status();
      case kFixed64:
        if (end_ - p_ < 8) return Error("fixed64 runs past the end");
        p_ += 8;
        return Status::Ok();
      case kLen: return Bytes().status();
      case kFixed32: return Fixed32().status();
      default: return Error(fmt::format("unsupported wire type {}", wire_type));
    }
  }
  Status Error(std::string what) const {
    return Corruption(fmt::format("malformed protobuf at byte {}: {}", pos(), what));
  }

 private:
  const char* p_;
  const char* end_;
  const char* begin_;
};

struct Tag {
  uint32_t field;
  uint32_t wire_type;
};

Result<Tag> ReadTag(Wire& w) {
  uint64_t t = AQ_TRY(w.Varint());
  if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff) return w.Error(fmt::format("invalid field number {}", t >> 3));
  return Tag{static_cast<uint32_t>(t >> 3), static_cast<uint32_t>(t & 7)};
}

Status ExpectWire(const Wire& w, const Tag& t, uint32_t want, std::string_view what) {
  if (t.wire_type == want) return Status::Ok();
  return w.Error(fmt::format("{} has wire type {}, expected {}", what, t.wire_type, want));
}

// ---- encoding ----
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
void PutTag(std::string* out, uint32_t field, uint32_t wt) { PutVarint(out, (static_cast<uint64_t>(field) << 3) | wt); }
void PutLen(std::string* out, uint32_t field, std::string_view bytes) {
  PutTag(out, field, kLen);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

std::string SerializeFeature(const Feature& f) {
  std::string list;
  uint32_t field = 0;
  switch (f.kind) {
    case FeatureKind::kNone: return {};
    case FeatureKind::kBytes:
      field = 1;
      for (const auto& b : f.bytes) PutLen(&list, 1, b);
      break;
    case FeatureKind::kFloat:
      field = 2;
      if (!f.floats.empty()) {
        PutTag(&list, 1, kLen);
        PutVarint(&list, f.floats.size() * 4);
        for (float v : f.floats) {
          char b[4];
          std::memcpy(b, &v, 4);
          list.append(b, 4);
        }
      }
      break;
    case FeatureKind::kInt64:
      field = 3;
      if (!f.ints.empty()) {
        size_t n = 0;
        for (int64_t v : f.ints) n += VarintSize(static_cast<uint64_t>(v));
        PutTag(&list, 1, kLen);
        PutVarint(&list, n);
        for (int64_t v : f.ints) PutVarint(&list, static_cast<uint64_t>(v));
      }
      break;
  }
  std::string out;
  PutLen(&out, field, list);
  return out;
}

Result<const Feature*> Find(const Example& ex, std::string_view key, FeatureKind kind) {
  auto it = ex.features.find(std::string(key));
  if (it == ex.features.end()) return static_cast<const Feature*>(nullptr);
  if (it->second.kind != kind && it->second.kind != FeatureKind::kNone) {
    return Corruption(fmt::format("feature '{}' has the wrong type", key));
  }
  return &it->second;
}

}  // namespace

Status ForEachFeature(std::string_view serialized, const std::function<Status(const FeatureView&)>& fn) {
  Wire ex(serialized);
  while (!ex.done()) {
    Tag t = AQ_TRY(ReadTag(ex));
    if (t.field != 1) {
      AQ_TRY(ex.Skip(t.wire_type));
      continue;
    }
    AQ_TRY(ExpectWire(ex, t, kLen, "Example.features"));
    Wire feats(AQ_TRY(ex.Bytes()));
    while (!feats.done()) {
      Tag ft = AQ_TRY(ReadTag(feats));
      if (ft.field != 1) {
        AQ_TRY(feats.Skip(ft.wire_type));
        continue;
      }
      AQ_TRY(ExpectWire(feats, ft, kLen, "Features.feature"));
      Wire entry(AQ_TRY(feats.Bytes()));
      FeatureView view;
      while (!entry.done()) {
        Tag et = AQ_TRY(ReadTag(entry));
        if (et.field == 1) {
          AQ_TRY(ExpectWire(entry, et, kLen, "map key"));
          view.key = AQ_TRY(entry.Bytes());
        } else if (et.field == 2) {
          AQ_TRY(ExpectWire(entry, et, kLen, "map value"));
          view.raw = AQ_TRY(entry.Bytes());
        } else {
          AQ_TRY(entry.Skip(et.wire_type));
        }
      }
      AQ_TRY(fn(view));
    }
  }
  return Status::Ok();
}

Result<Feature> ParseFeature(std::string_view raw) {
  Feature f;
  Wire w(raw);
  while (!w.done()) {
    Tag t = AQ_TRY(ReadTag(w));
    if (t.field < 1 || t.field > 3) {
      AQ_TRY(w.Skip(t.wire_type));
      continue;
    }
    AQ_TRY(ExpectWire(w, t, kLen, "Feature.kind"));
    Wire list(AQ_TRY(w.Bytes()));
    // oneof: a later kind replaces an earlier one; the same kind merges.
    auto kind = static_cast<FeatureKind>(t.field);
    if (f.kind != kind) f = Feature{kind, {}, {}, {}};
    while (!list.done()) {
      Tag lt = AQ_TRY(ReadTag(list));
      if (lt.field != 1) {
        AQ_TRY(list.Skip(lt.wire_type));
        continue;
      }
      if (kind == FeatureKind::kBytes) {
        AQ_TRY(ExpectWire(list, lt, kLen, "BytesList.value"));
        f.bytes.emplace_back(AQ_TRY(list.Bytes()));
      } else if (kind == FeatureKind::kFloat) {
        if (lt.wire_type == kLen) {  // packed
          std::string_view packed = AQ_TRY(list.Bytes());
          if (packed.size() % 4 != 0) return list.Error("packed float list length is not a multiple of 4");
          size_t n = packed.size() / 4;
          size_t old = f.floats.size();
          f.floats.resize(old + n);
          std::memcpy(f.floats.data() + old, packed.data(), packed.size());
        } else {
          AQ_TRY(ExpectWire(list, lt, kFixed32, "FloatList.value"));
          uint32_t bits = AQ_TRY(list.Fixed32());
          float v;
          std::memcpy(&v, &bits, 4);
          f.floats.push_back(v);
        }
      } else {
        if (lt.wire_type == kLen) {  // packed
          Wire packed(AQ_TRY(list.Bytes()));
          while (!packed.done()) f.ints.push_back(static_cast<int64_t>(AQ_TRY(packed.Varint())));
        } else {
          AQ_TRY(ExpectWire(list, lt, kVarint, "Int64List.value"));
          f.ints.push_back(static_cast<int64_t>(AQ_TRY(list.Varint())));
        }
      }
    }
  }
  return f;
}

Result<std::vector<std::string_view>> ParseBytesFeatureView(std::string_view raw) {
  std::vector<std::string_view> out;
  Wire w(raw);
  while (!w.done()) {
    Tag t = AQ_TRY(ReadTag(w));
    if (t.field < 1 || t.field > 3) {
      AQ_TRY(w.Skip(t.wire_type));
      continue;
    }
    AQ_TRY(ExpectWire(w, t, kLen, "Feature.kind"));
    std::string_view body = AQ_TRY(w.Bytes());
    if (t.field != 1) {
      out.clear();
      continue;
    }
    Wire list(body);
    while (!list.done()) {
      Tag lt = AQ_TRY(ReadTag(list));
      if (lt.field != 1) {
        AQ_TRY(list.Skip(lt.wire_type));
        continue;
      }
      AQ_TRY(ExpectWire(list, lt, kLen, "BytesList.value"));
      out.push_back(AQ_TRY(list.Bytes()));
    }
  }
  return out;
}

Result<Example> ParseExample(std::string_view serialized) {
  Example ex;
  AQ_TRY(ForEachFeature(serialized, [&](const FeatureView& v) -> Status {
    ex.features[std::string(v.key)] = AQ_TRY(ParseFeature(v.raw));
    return Status::Ok();
  }));
  return ex;
}

std::string SerializeExample(const Example& example) {
  std::string features;
  std::string entry;
  for (const auto& [key, feature] : example.features) {
    entry.clear();
    PutLen(&entry, 1, key);
    PutLen(&entry, 2, SerializeFeature(feature));
    PutLen(&features, 1, entry);
  }
  std::string out;
  out.reserve(features.size() + 8);
  PutLen(&out, 1, features);
  return out;
}

Example ToExample(const ImageRecord& r) {
  Example ex;
  auto& f = ex.features;
  std::vector<float> xmin, ymin, xmax, ymax;
  for (const auto& b : r.boxes) {
    xmin.push_back(b.xmin);
    ymin.push_back(b.ymin);
    xmax.push_back(b.xmax);
    ymax.push_back(b.ymax);
  }
  f[std::string(keys::kHeight)] = Feature::Ints({r.height});
  f[std::string(keys::kWidth)] = Feature::Ints({r.width});
  f[std::string(keys::kColorspace)] = Feature::Bytes({r.colorspace});
  f[std::string(keys::kChannels)] = Feature::Ints({r.channels});
  f[std::string(keys::kLabel)] = Feature::Ints({r.label});
  f[std::string(keys::kSynset)] = Feature::Bytes({r.synset});
  f[std::string(keys::kText)] = Feature::Bytes({r.text});
  f[std::string(keys::kXmin)] = Feature::Floats(std::move(xmin));
  f[std::string(keys::kYmin)] = Feature::Floats(std::move(ymin));
  f[std::string(keys::kXmax)] = Feature::Floats(std::move(xmax));
  f[std::string(keys::kYmax)] = Feature::Floats(std::move(ymax));
  f[std::string(keys::kBboxLabel)] = Feature::Ints(std::vector<int64_t>(r.boxes.size(), r.label));
  f[std::string(keys::kFormat)] = Feature::Bytes({r.format});
  f[std::string(keys::kFilename)] = Feature::Bytes({r.filename});
  f[std::string(keys::kEncoded)] = Feature::Bytes({r.encoded});
  return ex;
}

Result<ImageRecord> FromExample(const Example& ex) {
  ImageRecord r;
  auto first_bytes = [&](std::string_view key, std::string* out) -> Status {
    const Feature* f = AQ_TRY(Find(ex, key, FeatureKind::kBytes));
    if (f != nullptr && !f->bytes.empty()) *out = f->bytes.front();
    return Status::Ok();
  };
  auto first_int = [&](std::string_view key, int64_t* out) -> Result<bool> {
    const Feature* f = AQ_TRY(Find(ex, key, FeatureKind::kInt64));
    if (f == nullptr || f->ints.empty()) return false;
    *out = f->ints.front();
    return true;
  };
  const Feature* enc = AQ_TRY(Find(ex, keys::kEncoded, FeatureKind::kBytes));
  if (enc == nullptr || enc->bytes.empty()) return Corruption("Example has no image/encoded bytes");
  r.encoded = enc->bytes.front();
  if (!AQ_TRY(first_int(keys::kLabel, &r.label))) return Corruption("Example has no image/class/label");
  (void)AQ_TRY(first_int(keys::kHeight, &r.height));
  (void)AQ_TRY(first_int(keys::kWidth, &r.width));
  (void)AQ_TRY(first_int(keys::kChannels, &r.channels));
  AQ_TRY(first_bytes(keys::kColorspace, &r.colorspace));
  AQ_TRY(first_bytes(keys::kFormat, &r.format));
  AQ_TRY(first_bytes(keys::kFilename, &r.filename));
  AQ_TRY(first_bytes(keys::kSynset, &r.synset));
  AQ_TRY(first_bytes(keys::kText, &r.text));
  const Feature* xs[4];
  std::string_view box_keys[4] = {keys::kXmin, keys::kYmin, keys::kXmax, keys::kYmax};
  size_t nbox = SIZE_MAX;
  for (int i = 0; i < 4; ++i) {
    xs[i] = AQ_TRY(Find(ex, box_keys[i], FeatureKind::kFloat));
    nbox = std::min(nbox, xs[i] == nullptr ? size_t{0} : xs[i]->floats.size());
  }
  for (size_t i = 0; i < nbox; ++i) {
    r.boxes.push_back({xs[0]->floats[i], xs[1]->floats[i], xs[2]->floats[i], xs[3]->floats[i]});
  }
  return r;
}

Result<ImageFieldsView> ParseImageFields(std::string_view serialized) {
  ImageFieldsView v;
  AQ_TRY(ForEachFeature(serialized, [&](const FeatureView& f) -> Status {
    if (f.key == keys::kEncoded || f.key == keys::kFilename) {
      auto list = AQ_TRY(ParseBytesFeatureView(f.raw));
      std::string_view first = list.empty() ? std::string_view() : list.front();
      (f.key == keys::kEncoded ? v.encoded : v.filename) = first;
    } else if (f.key == keys::kLabel || f.key == keys::kHeight || f.key == keys::kWidth) {
      Feature feat = AQ_TRY(ParseFeature(f.raw));
      if (feat.kind != FeatureKind::kInt64 || feat.ints.empty()) {
        if (f.key == keys::kLabel) v.has_label = false;
        return Status::Ok();
      }
      if (f.key == keys::kLabel) {
        v.label = feat.ints.front();
        v.has_label = true;
      } else {
        (f.key == keys::kHeight ? v.height : v.width) = feat.ints.front();
      }
    }
    return Status::Ok();
  }));
  if (v.encoded.empty()) return Corruption("Example has no image/encoded bytes");
  return v;
}

}  // namespace aq::format
