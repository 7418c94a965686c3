// aquifer._aquifer: the input pipeline for Python. A Source is one
// pipeline::Pipeline (one or more epochs, possibly resumed mid-epoch) whose
// batches leave as numpy arrays that own their batch buffer (zero copy: the
// buffer returns to the pipeline when the array is collected), waited for
// with the GIL released and interruptible by Ctrl-C. python/aquifer/loader.py
// builds the PyTorch-style Loader on it; no planning, decoding or shuffling
// happens in Python.
//
// Thread safety: a Source is used from one Python thread at a time (the GIL
// serialises calls); arrays may be dropped from any thread.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/credentials.h"
#include "client/s3_file_system.h"
#include "common/units.h"
#include "common/utf8.h"
#include "format/example.h"
#include "io/file_system.h"
#include "pipeline/options_schema.h"
#include "pipeline/pipeline.h"
#include "pipeline/plan.h"

namespace py = pybind11;

namespace aq::python {
namespace {

// A file name (or a message that holds one) as Python's str, the way
// os.fsdecode makes it: bytes that are not UTF-8 become lone surrogates
// (surrogateescape), and os.fsencode gives the raw bytes back.
py::str FsStr(const std::string& s) {
  PyObject* o = PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// A message for an exception's text, which must be UTF-8: bytes that are
// not are written as \xNN.
std::string Printable(const std::string& s) {
  if (IsUtf8(s)) return s;
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Sequence(s, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

// A Status as the Python exception a caller would expect.
[[noreturn]] void Raise(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: throw py::value_error(Printable(s.ToString()));
    case StatusCode::kNotFound: {
      PyErr_SetString(PyExc_FileNotFoundError, Printable(s.ToString()).c_str());
      throw py::error_already_set();
    }
    case StatusCode::kPermissionDenied: {
      PyErr_SetString(PyExc_PermissionError, Printable(s.ToString()).c_str());
      throw py::error_already_set();
    }
    case StatusCode::kTimedOut: {
      PyErr_SetString(PyExc_TimeoutError, Printable(s.ToString()).c_str());
      throw py::error_already_set();
    }
    case StatusCode::kUnavailable: {  // the store (the nodes it names) could not answer within the deadline
      PyErr_SetString(PyExc_ConnectionError, Printable(s.ToString()).c_str());
      throw py::error_already_set();
    }
    default: throw std::runtime_error(Printable(s.ToString()));
  }
}

template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

// The catalog of a dataset, handed from one Source to the next so an epoch
// does not read the indexes again.
// With it, which samples were found undamaged (later epochs do not read
// every file to its end again) and the batch buffers (the next epoch's
// pipeline allocates none).
struct CatalogHandle {
  std::shared_ptr<const pipeline::Catalog> catalog;
  std::shared_ptr<pipeline::DamageChecked> damage_checked;
  std::shared_ptr<pipeline::BatchBuffers> buffers;
};

// A Python value as the schema's type for the option (pipeline/options_schema.h).
pipeline::OptionValue ToOptionValue(const pipeline::OptionSpec& spec, const py::handle& v) {
  using T = pipeline::OptionType;
  const std::string name(spec.name);
  auto is_int = [](const py::handle& h) { return py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h); };
  switch (spec.type) {
    case T::kBool:
      if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
      break;
    case T::kInt:
    case T::kFloat:
      if (is_int(v)) return v.cast<int64_t>();
      if (py::isinstance<py::float_>(v)) return v.cast<double>();
      break;
    case T::kText:
      if (py::isinstance<py::str>(v)) return v.cast<std::string>();
      if (is_int(v)) return v.cast<int64_t>();  // memory_limit in bytes
      break;
    case T::kFloats:
      if (py::isinstance<py::sequence>(v) && !py::isinstance<py::str>(v)) {
        std::vector<double> out;
        for (const auto& e : v.cast<py::sequence>()) {
          if (!is_int(e) && !py::isinstance<py::float_>(e)) throw py::value_error(name + ": expected numbers");
          out.push_back(e.cast<double>());
        }
        return out;
      }
      break;
    case T::kTexts:
      if (py::isinstance<py::sequence>(v) && !py::isinstance<py::str>(v)) {
        std::vector<std::string> out;
        for (const auto& e : v.cast<py::sequence>()) {
          if (!py::isinstance<py::str>(e)) throw py::value_error(name + ": expected a list of names");
          out.push_back(e.cast<std::string>());
        }
        return out;
      }
      break;
  }
  throw py::value_error(name + ": " + std::string(spec.doc) + " (got " + py::repr(v).cast<std::string>() + ")");
}

// The schema's value as Python's: what option_defaults() returns.
py::object FromOptionValue(const pipeline::OptionValue& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

// PipelineOptions from the keyword arguments Loader passes, by the schema;
// the binding's own (rank, world_size, credentials, profile,
// retry_deadline, catalog) beside it. Unknown keys are an error, so a
// misspelt option never goes unnoticed.
pipeline::PipelineOptions OptionsFrom(const py::dict& kw, int64_t* rank, int64_t* world, std::string* credentials,
                                      std::string* profile, std::shared_ptr<const pipeline::Catalog>* catalog,
                                      client::ClientOptions* client) {
  pipeline::PipelineOptions o;
  for (const auto& [k, v] : kw) {
    const std::string key = k.cast<std::string>();
    if (v.is_none()) continue;
    if (key == "rank") {
      *rank = v.cast<int64_t>();
    } else if (key == "world_size") {
      *world = v.cast<int64_t>();
    } else if (key == "credentials") {
      *credentials = v.cast<std::string>();
    } else if (key == "profile") {
      *profile = v.cast<std::string>();
    } else if (key == "retry_deadline") {
      const double d = v.cast<double>();
      if (!(d >= 0)) throw py::value_error("retry_deadline: seconds, 0 or more");
      client->retry_deadline_s = d;
    } else if (key == "catalog") {
      const auto& h = v.cast<const CatalogHandle&>();
      *catalog = h.catalog;
      o.damage_checked = h.damage_checked;
      o.buffers = h.buffers;
    } else if (const auto* spec = pipeline::FindOption(key)) {
      Status s = pipeline::SetOption(o, key, ToOptionValue(*spec, v));
      if (!s.ok()) Raise(s);
    } else {
      throw py::type_error("unknown option '" + key + "'");
    }
  }
  if (o.data.empty()) throw py::value_error("data: a dataset path or aquifer:// URL is required");
  return o;
}

class Source {
 public:
  explicit Source(const py::kwargs& kw) {
    int64_t rank = -1, world = -1;
    std::string credentials, profile;
    std::shared_ptr<const pipeline::Catalog> catalog;
    client::ClientOptions client = client::ClientOptionsFromEnvironment();
    options_ = OptionsFrom(kw, &rank, &world, &credentials, &profile, &catalog, &client);
    const auto who = Take(pipeline::ResolveRank(rank, world));
    options_.rank = who.rank;
    options_.world = who.world;
    options_.catalog = std::move(catalog);
    // A Source serves aquifer.Loader: its loop holds the current batch while
    // it asks for the next, and the next epochs' pipeline starts before
    // this one ends. The memory bound counts both.
    options_.held_batches = 1;
    options_.overlapped = true;
    client::CredentialOptions co{credentials, profile};
    fs_ = client::NewRoutingFileSystem(
        io::NewPosixFileSystem(), client::NewStoreFileSystem([co] { return client::FindCredentials(co); }, client));
    pipe_ = Take([&] {
      py::gil_scoped_release unlocked;  // reading indexes may take a while (aquifer://)
      return pipeline::Pipeline::Create(*fs_, options_);
    }());
  }

  ~Source() { Close(); }

  void Close() {
    if (!pipe_) return;
    py::gil_scoped_release unlocked;  // workers finishing a sample need no GIL; joining may wait for them
    pipe_.reset();
  }

  // The next batch as (images, labels, info), or None after the last.
  py::object Next() {
    if (!pipe_) throw std::runtime_error("aquifer: the source is closed");
    std::unique_ptr<pipeline::BatchLease> lease;
    while (true) {
      auto r = [&] {
        py::gil_scoped_release unlocked;
        return pipe_->NextLease(0.1);
      }();
      if (r.ok()) {
        lease = std::move(*r);
        break;
      }
      if (r.status().code() != StatusCode::kTimedOut) Raise(r.status());
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while waiting
    }
    if (!lease) return py::none();
    const pipeline::Batch& b = lease->batch();
    const auto size = static_cast<py::ssize_t>(b.size);
    const auto side = static_cast<py::ssize_t>(options_.image_size);
    py::dtype dtype = options_.store.dtype == image::DType::kUint8     ? py::dtype("uint8")
                      : options_.store.dtype == image::DType::kFloat16 ? py::dtype("float16")
                                                                       : py::dtype("float32");
    const auto item = static_cast<py::ssize_t>(image::DTypeSize(options_.store.dtype));
    std::vector<py::ssize_t> shape, strides;
    if (options_.store.layout == image::Layout::kNCHW) {
      shape = {size, 3, side, side};
      strides = {3 * side * side * item, side * side * item, side * item, item};
    } else {
      shape = {size, side, side, 3};
      strides = {side * side * 3 * item, side * 3 * item, 3 * item, item};
    }
    py::array_t<int64_t> labels(size);  // int64: what torch's losses take
    int64_t* l = labels.mutable_data();
    for (py::ssize_t i = 0; i < size; ++i) l[i] = b.labels[i];
    py::array_t<uint32_t> samples(size);
    std::memcpy(samples.mutable_data(), b.samples, static_cast<size_t>(size) * sizeof(uint32_t));
    py::dict info;
    info["epoch"] = b.epoch;
    info["step"] = b.step;
    info["samples"] = samples;
    info["replaced"] = b.replaced;
    py::array_t<float> crops({size, static_cast<py::ssize_t>(4)});
    std::memcpy(crops.mutable_data(), b.crops, static_cast<size_t>(size) * 4 * sizeof(float));
    py::array_t<bool> flips(size);
    for (py::ssize_t i = 0; i < size; ++i) flips.mutable_data()[i] = b.flips[i] != 0;
    info["crops"] = crops;
    info["flips"] = flips;
    if (!options_.fields.empty()) info["fields"] = Fields(b);
    if (options_.encoded_images) info["encoded"] = Encoded(b);
    // The array owns the lease: the batch buffer returns to the pipeline
    // when Python drops the last view of it.
    void* data = lease->mutable_data();
    auto* owner = lease.release();
    py::capsule base(owner, [](void* p) { delete static_cast<pipeline::BatchLease*>(p); });
    py::array images(dtype, shape, strides, data, base);
    return py::make_tuple(images, labels, info);
  }

  // encoded_images: the JPEGs delivered undecoded, as (bytes, offsets):
  // one uint8 array of them all and int64 offsets (size + 1); sample i's
  // JPEG is bytes[offsets[i]:offsets[i + 1]], empty where it was decoded
  // here (its pixels are in the batch).
  py::tuple Encoded(const pipeline::Batch& b) const {
    const size_t nf = options_.fields.size() + 1, k = options_.fields.size();
    py::array_t<int64_t> offsets(static_cast<py::ssize_t>(b.size) + 1);
    int64_t* off = offsets.mutable_data();
    off[0] = 0;
    for (uint32_t i = 0; i < b.size; ++i) {
      off[i + 1] = off[i] + (b.present[i * nf + k] ? static_cast<int64_t>(b.fields[i * nf + k].size()) : 0);
    }
    py::array_t<uint8_t> bytes(static_cast<py::ssize_t>(off[b.size]));
    uint8_t* out = bytes.mutable_data();
    for (uint32_t i = 0; i < b.size; ++i) {
      if (b.present[i * nf + k]) std::memcpy(out + off[i], b.fields[i * nf + k].data(), b.fields[i * nf + k].size());
    }
    return py::make_tuple(bytes, offsets);
  }

  // Each sample's options_.fields as a dict: a WebDataset member's bytes;
  // a tf.Example feature as a list of bytes, or a numpy array of int64 or
  // float32; None where the record has no such field.
  py::list Fields(const pipeline::Batch& b) const {
    py::list out;
    const size_t nf = options_.fields.size() + (options_.encoded_images ? 1 : 0);  // the stride
    const dataset::Format format = pipe_->catalog()->format;
    const bool example = format == dataset::Format::kTFRecord;
    for (uint32_t i = 0; i < b.size; ++i) {
      py::dict d;
      for (size_t k = 0; k < options_.fields.size(); ++k) {
        const std::string& raw = b.fields[i * nf + k];
        if (!b.present[i * nf + k]) {
          d[py::str(options_.fields[k])] = py::none();
        } else if (format == dataset::Format::kRecordIO) {
          if (options_.fields[k] == "id") {
            uint64_t id = 0;
            std::memcpy(&id, raw.data(), std::min(raw.size(), sizeof id));
            d[py::str(options_.fields[k])] = py::int_(id);
          } else {
            std::vector<float> v(raw.size() / sizeof(float));
            std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
            d[py::str(options_.fields[k])] = py::array_t<float>(static_cast<py::ssize_t>(v.size()), v.data());
          }
        } else if (!example) {
          d[py::str(options_.fields[k])] = py::bytes(raw);
        } else {
          const format::Feature f = Take(format::ParseFeature(raw));
          if (f.kind == format::FeatureKind::kBytes) {
            py::list l;
            for (const auto& x : f.bytes) l.append(py::bytes(x));
            d[py::str(options_.fields[k])] = l;
          } else if (f.kind == format::FeatureKind::kFloat) {
            d[py::str(options_.fields[k])] =
                py::array_t<float>(static_cast<py::ssize_t>(f.floats.size()), f.floats.data());
          } else if (f.kind == format::FeatureKind::kInt64) {
            d[py::str(options_.fields[k])] =
                py::array_t<int64_t>(static_cast<py::ssize_t>(f.ints.size()), f.ints.data());
          } else {
            d[py::str(options_.fields[k])] = py::list();
          }
        }
      }
      out.append(d);
    }
    return out;
  }

  uint64_t steps_per_epoch() const { return pipe_ ? pipe_->steps_per_epoch() : 0; }
  uint32_t rank() const { return options_.rank; }
  uint32_t world_size() const { return options_.world; }

  CatalogHandle catalog() const {
    if (!pipe_) throw std::runtime_error("aquifer: the source is closed");
    return {pipe_->catalog(), pipe_->damage_checked(), pipe_->buffers()};
  }

  py::dict Stats() const {
    if (!pipe_) throw std::runtime_error("aquifer: the source is closed");
    const pipeline::PipelineStats s = pipe_->Stats();
    py::dict d;
    d["elapsed_seconds"] = s.elapsed_seconds;
    d["batches"] = s.batches;
    d["images"] = s.images;
    d["images_per_second"] = s.elapsed_seconds > 0 ? static_cast<double>(s.images) / s.elapsed_seconds : 0.0;
    d["bytes_read"] = s.bytes_read;
    py::list stages;
    for (const auto& st : s.stages) {
      py::dict x;
      x["name"] = st.name;
      x["threads"] = st.threads;
      x["busy_seconds"] = st.busy_seconds;
      x["utilisation"] = st.utilisation;
      stages.append(x);
    }
    d["stages"] = stages;
    d["limiting_stage"] = s.limiting_stage;
    d["consumer_wait_seconds"] = s.consumer_wait_seconds;
    d["worker_wait_input_seconds"] = s.worker_wait_input_seconds;
    d["worker_wait_output_seconds"] = s.worker_wait_output_seconds;
    d["memory_bound_bytes"] = s.memory_bound_bytes;
    d["batch_buffers"] = s.batch_buffers;
    d["batch_buffer_bytes"] = s.batch_buffer_bytes;
    d["payload_bytes"] = s.payload_bytes;
    d["payload_peak_bytes"] = s.payload_peak_bytes;
    d["payload_pool_bytes"] = s.payload_pool_bytes;
    d["bad_samples"] = s.bad_samples;
    d["lost_parts"] = s.lost_parts;
    d["manifest"] = FsStr(s.manifest);
    d["manifest_trusted"] = s.manifest_trusted;
    d["manifest_changed"] = s.manifest_changed;
    d["planned"] = s.planned;
    d["plan_staged"] = s.plan_staged;
    d["plan_error"] = FsStr(s.plan_error);
    py::list problems;
    for (const auto& p : s.problems) {
      py::dict x;
      x["file"] = FsStr(p.file);
      x["record"] = p.record;
      x["offset"] = p.offset;
      x["message"] = FsStr(p.message);
      problems.append(x);
    }
    d["problems"] = problems;
    d["rank"] = s.rank;
    d["world_size"] = s.world;
    d["steps_per_epoch"] = s.steps_per_epoch;
    d["dataset_samples"] = s.catalog_samples;
    return d;
  }

 private:
  pipeline::PipelineOptions options_;
  std::unique_ptr<io::FileSystem> fs_;  // outlives pipe_
  std::unique_ptr<pipeline::Pipeline> pipe_;
};

// One file system per (credentials file, profile), shared by every File of
// the process (their connections and the cluster's member list with them)
// and kept for its life.
io::FileSystem& SharedFileSystem(const std::string& credentials, const std::string& profile) {
  static std::mutex mu;
  static auto* systems = new std::map<std::pair<std::string, std::string>, std::unique_ptr<io::FileSystem>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& fs = (*systems)[{credentials, profile}];
  if (!fs) {
    client::CredentialOptions co{credentials, profile};
    fs = client::NewRoutingFileSystem(io::NewPosixFileSystem(),
                                      client::NewStoreFileSystem([co] { return client::FindCredentials(co); },
                                                                 client::ClientOptionsFromEnvironment()));
  }
  return *fs;
}

// A Status from a file operation as OSError (FileNotFoundError,
// PermissionError, ... where one fits), as Python's own files raise.
[[noreturn]] void RaiseIo(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied:
    case StatusCode::kTimedOut:
    case StatusCode::kUnavailable: Raise(s);
    default: {
      PyErr_SetString(PyExc_OSError, Printable(s.ToString()).c_str());
      throw py::error_already_set();
    }
  }
}

// A file of the store (or a local one) for aquifer.open: positional reads,
// or a writer whose bytes are stored whole at close() and never if it is
// aborted or dropped. The Python side (python/aquifer/files.py) adds the
// file position, buffering and io's interface. Calls release the GIL.
class File {
 public:
  File(const std::string& path, const std::string& mode, const std::string& credentials, const std::string& profile)
      : path_(path) {
    io::FileSystem& fs = SharedFileSystem(credentials, profile);
    py::gil_scoped_release unlocked;
    if (mode == "r") {
      auto r = fs.OpenRead(path, io::AccessHint::kSequential);
      if (!r.ok()) {
        py::gil_scoped_acquire locked;
        RaiseIo(r.status());
      }
      reader_ = std::move(*r);
    } else if (mode == "w") {
      auto w = fs.OpenWrite(path);
      if (!w.ok()) {
        py::gil_scoped_acquire locked;
        RaiseIo(w.status());
      }
      writer_ = std::move(*w);
    } else {
      py::gil_scoped_acquire locked;
      throw py::value_error("mode must be 'r' or 'w', not '" + mode + "'");
    }
  }

  uint64_t size() const {
    if (reader_) return reader_->size();
    return writer_ ? writer_->size() : 0;
  }
  std::string version() const { return reader_ ? reader_->version() : std::string(); }

  // Bytes from `offset` into the writable buffer `out`; 0 at the end.
  size_t ReadInto(uint64_t offset, py::buffer out) {
    if (!reader_) throw py::value_error(Printable(path_ + ": not open for reading"));
    py::buffer_info b = out.request(true);
    size_t n = static_cast<size_t>(b.size * b.itemsize);
    Result<size_t> got = [&] {
      py::gil_scoped_release unlocked;
      size_t done = 0;
      while (done < n) {  // a short read only at the end
        auto r = reader_->ReadAt(offset + done, n - done, static_cast<char*>(b.ptr) + done);
        if (!r.ok()) return r;
        if (*r == 0) break;
        done += *r;
      }
      return Result<size_t>(done);
    }();
    if (!got.ok()) RaiseIo(got.status());
    return *got;
  }

  void WriteAt(uint64_t offset, py::buffer data) {
    io::WritableFile& w = Writer();
    py::buffer_info b = data.request();
    const std::string_view bytes(static_cast<const char*>(b.ptr), static_cast<size_t>(b.size * b.itemsize));
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = offset == w.size() ? w.Append(bytes) : w.WriteAt(offset, bytes);
    }
    if (!s.ok()) RaiseIo(s);
  }

  void Truncate(uint64_t size) {
    io::WritableFile& w = Writer();
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = w.Truncate(size);
    }
    if (!s.ok()) RaiseIo(s);
  }

  // Stores a written file (whole, or not at all: the error says why).
  void Close() {
    reader_.reset();
    if (!writer_) return;
    std::unique_ptr<io::WritableFile> w = std::move(writer_);
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = w->Close();
      w.reset();
    }
    if (!s.ok()) RaiseIo(s);
  }

  // Drops a written file: nothing is stored.
  void Abort() {
    py::gil_scoped_release unlocked;
    writer_.reset();
    reader_.reset();
  }

  bool closed() const { return !reader_ && !writer_; }

 private:
  io::WritableFile& Writer() {
    if (!writer_) throw py::value_error(Printable(path_ + ": not open for writing"));
    return *writer_;
  }

  std::string path_;
  std::unique_ptr<io::RandomAccessFile> reader_;
  std::unique_ptr<io::WritableFile> writer_;
};

}  // namespace
}  // namespace aq::python

PYBIND11_MODULE(_aquifer, m) {
  using aq::python::CatalogHandle;
  using aq::python::Source;
  m.doc() = "aquifer's input pipeline (C++); use aquifer.Loader";
  m.attr("__version__") = AQ_VERSION;
  m.def(
      "option_defaults",
      [] {
        py::dict d;
        const aq::pipeline::PipelineOptions defaults;
        for (const auto& spec : aq::pipeline::OptionSchema()) {
          d[py::str(std::string(spec.name))] = aq::python::FromOptionValue(spec.get(defaults));
        }
        return d;
      },
      "Every pipeline option's default, by name, from the one schema the CLI and the C++ API use");
  m.def(
      "option_docs",
      [] {
        py::dict d;
        for (const auto& spec : aq::pipeline::OptionSchema()) {
          d[py::str(std::string(spec.name))] = py::make_tuple(std::string(spec.default_text), std::string(spec.doc));
        }
        return d;
      },
      "Every pipeline option's default as written and its help, by name");
  m.def(
      "send_plan",
      [](const std::string& stream, const py::kwargs& kw) {
        int64_t rank = -1, world = -1;
        std::string credentials, profile;
        std::shared_ptr<const aq::pipeline::Catalog> catalog;
        aq::client::ClientOptions client = aq::client::ClientOptionsFromEnvironment();
        auto o = aq::python::OptionsFrom(kw, &rank, &world, &credentials, &profile, &catalog, &client);
        if (rank < 0 || world < 1) throw py::value_error("send_plan: give rank and world_size");
        const auto who = aq::python::Take(aq::pipeline::ResolveRank(rank, world));
        o.rank = who.rank;
        o.world = who.world;
        auto& fs = aq::python::SharedFileSystem(credentials, profile);
        auto sent = [&] {
          py::gil_scoped_release unlocked;
          return aq::pipeline::Pipeline::SendPlan(fs, o, stream);
        }();
        const auto s = aq::python::Take(std::move(sent));
        py::dict d;
        d["stream"] = s.stream;
        d["reads"] = s.reads;
        d["bytes"] = s.bytes;
        d["taken_up"] = s.taken_up;
        return d;
      },
      py::arg("stream"),
      "Sends the read plan of one rank's pipeline (the same options as aquifer.Loader's) to the store without "
      "reading: {stream, reads, bytes, taken_up}");
  m.def(
      "cancel_plan",
      [](const std::string& stream, const std::string& data, const std::string& credentials,
         const std::string& profile) {
        auto& fs = aq::python::SharedFileSystem(credentials, profile);
        aq::Status s;
        {
          py::gil_scoped_release unlocked;
          s = fs.CancelPlan(data, stream);
        }
        if (!s.ok()) aq::python::RaiseIo(s);
      },
      py::arg("stream"), py::arg("data"), py::arg("credentials") = "", py::arg("profile") = "",
      "Tells the store that `data` is on to forget what the stream `stream` planned (reads not yet staged, blocks "
      "held for it)");
  m.def(
      "list_dir",
      [](const std::string& path, const std::string& credentials, const std::string& profile) {
        auto& fs = aq::python::SharedFileSystem(credentials, profile);
        aq::Result<std::vector<aq::io::FileInfo>> got = [&] {
          py::gil_scoped_release unlocked;
          return fs.List(path);
        }();
        if (!got.ok()) aq::python::RaiseIo(got.status());
        py::list out;
        for (const auto& e : *got) {
          out.append(py::make_tuple(aq::python::FsStr(e.name), e.size, e.is_dir, e.mtime_s));
        }
        return out;
      },
      py::arg("path"), py::arg("credentials") = "", py::arg("profile") = "",
      "(name, size, is_dir, mtime) of each entry of a directory (a key prefix of the store)");
  m.def(
      "remove",
      [](const std::string& path, const std::string& credentials, const std::string& profile) {
        auto& fs = aq::python::SharedFileSystem(credentials, profile);
        aq::Status s;
        {
          py::gil_scoped_release unlocked;
          s = fs.Remove(path);
        }
        if (!s.ok()) aq::python::RaiseIo(s);
      },
      py::arg("path"), py::arg("credentials") = "", py::arg("profile") = "", "Removes a file (an object)");
  using aq::python::File;
  py::class_<File>(m, "File",
                   "A file of the store for aquifer.open: positional reads, or a writer stored whole at close")
      .def(py::init<const std::string&, const std::string&, const std::string&, const std::string&>(), py::arg("path"),
           py::arg("mode"), py::arg("credentials") = "", py::arg("profile") = "")
      .def_property_readonly("size", &File::size)
      .def_property_readonly("version", &File::version)
      .def_property_readonly("closed", &File::closed)
      .def("readinto", &File::ReadInto, "Bytes from an offset into a writable buffer; how many (0 at the end)")
      .def("write_at", &File::WriteAt, "Bytes at an offset (past the end: a hole of zeros)")
      .def("truncate", &File::Truncate, "Sets the size")
      .def("close", &File::Close, "Stores a written file whole (raises OSError if it was not stored)")
      .def("abort", &File::Abort, "Drops a written file: nothing is stored");
  py::class_<CatalogHandle>(m, "Catalog", "Where every sample of a dataset is; reused by the next epoch's Source");
  py::class_<Source>(m, "Source", "One pipeline run: its batches, in order, as numpy arrays owning their buffers")
      .def(py::init<const py::kwargs&>())
      .def("next", &Source::Next, "(images, labels, info) or None after the last batch")
      .def("close", &Source::Close, "Stop the pipeline's threads now (batches already handed out stay valid)")
      .def("stats", &Source::Stats)
      .def("catalog", &Source::catalog)
      .def_property_readonly("steps_per_epoch", &Source::steps_per_epoch)
      .def_property_readonly("rank", &Source::rank)
      .def_property_readonly("world_size", &Source::world_size);
}
