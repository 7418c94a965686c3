#include "bench/sizing.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/units.h"

namespace aq::bench {
namespace {

constexpr const char* kMeasuredNode = "measured";

const char* kTable =
    "Dell EMC Isilon + DGX-1 and DSS 8440 papers, 'Sizing consideration based on benchmarked workloads' table";

std::vector<WorkloadProfile> BuildWorkloads() {
  return {
      {"resnet50-train-small", "low", "training, small images, ResNet-50", "V100", 90.0, kTable},
      {"resnet50-infer-small", "medium", "inference, small images, ResNet-50", "V100", 160.0, kTable},
      {"inception4-train-large", "high", "training, large images, Inception-v4", "V100", 300.0, kTable},
      {"resnet50-train-a100", "", "MLPerf ResNet-50 training, A100", "A100", std::nullopt,
       "Dell EMC PowerScale + DGX A100 paper: 'a single F800 node could handle eight NVIDIA A100 GPUs' (MLPerf "
       "0.7); no MB/s per GPU is given"},
  };
}

std::vector<NodeProfile> BuildNodes() {
  return {
      {"f800",
       "Isilon F800 all-flash node (4 per chassis, 60 SSDs per chassis)",
       {{"resnet50-train-small", 27},
        {"resnet50-infer-small", 20},
        {"inception4-train-large", 9},
        {"resnet50-train-a100", 8}},
       15000.0 / 4,
       "GPUs per node: the sizing table (V100) and the DGX A100 paper (A100); spec: 15 GB/s per 4-node chassis"},
      {"h500",
       "Isilon H500 hybrid node (4 per chassis, 60 SATA drives per chassis)",
       {{"resnet50-train-small", 7}, {"resnet50-infer-small", 5}, {"inception4-train-large", 2}},
       5000.0 / 4,
       "GPUs per node: the sizing table (from general NFS benchmarks, not DL runs at scale); spec: up to 5 GB/s "
       "per 4-node chassis, 25-33% of an F800 for sequential reads"},
  };
}

std::string Names(const auto& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

}  // namespace

const std::vector<WorkloadProfile>& WorkloadProfiles() {
  static const auto w = BuildWorkloads();
  return w;
}

const std::vector<NodeProfile>& NodeProfiles() {
  static const auto n = BuildNodes();
  return n;
}

Result<WorkloadProfile> FindWorkload(const std::string& name) {
  for (const auto& w : WorkloadProfiles()) {
    if (w.name == name) return w;
  }
  return NotFound(fmt::format("unknown workload '{}' (known: {})", name, Names(WorkloadProfiles())));
}

Result<NodeProfile> FindNode(const std::string& name) {
  for (const auto& n : NodeProfiles()) {
    if (n.name == name) return n;
  }
  return NotFound(fmt::format("unknown node profile '{}' (known: {})", name, Names(NodeProfiles())));
}

Result<ResultDemand> DemandFromDoctorResult(const nlohmann::json& j, const std::string& where,
                                            const std::string& form) {
  const nlohmann::json& sum = j.value("summary", nlohmann::json());
  if (!sum.is_object() || !sum.contains("forms") || !sum["forms"].is_array()) {
    return InvalidArgument(fmt::format("{}: not a doctor result (no forms)", where));
  }
  const std::string want = form.empty() ? sum.value("pick", "") : form;
  std::string known;
  for (const auto& f : sum["forms"]) {
    const std::string name = f.value("form", "");
    known += (known.empty() ? "" : ", ") + name;
    if (name != want) continue;
    ResultDemand d;
    d.images_per_second_per_gpu = sum.value("model_images_per_second_per_gpu", 0.0);
    d.bytes_per_image = f.value("bytes_per_image", 0.0);
    d.demand_mb_per_second_per_gpu = f.value("mb_per_second_per_gpu", 0.0);
    d.gpu_bound = true;
    if (d.demand_mb_per_second_per_gpu <= 0) {
      return InvalidArgument(fmt::format("{}: form '{}' has no MB/s per GPU", where, name));
    }
    d.explanation = fmt::format("{}: doctor's form '{}', {:.0f} images/s per GPU x {:.0f} bytes per image", where, name,
                                d.images_per_second_per_gpu, d.bytes_per_image);
    return d;
  }
  return InvalidArgument(fmt::format("{}: no form '{}' in the doctor's result (it has: {})", where, want, known));
}

Result<MeasuredNode> NodeFromStorageResult(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("summary") || !j["summary"].is_object() || !j.contains("config") ||
      !j["config"].is_object()) {
    return InvalidArgument(fmt::format("{}: not a bench result (no summary and config)", where));
  }
  if (j.value("command", "") != "bench storage") {
    return InvalidArgument(
        fmt::format("{}: a node is measured by `aquifer bench storage aquifer://NODE/BUCKET/...`; "
                    "this is a '{}' result",
                    where, j.value("command", "?")));
  }
  const auto& sum = j["summary"];
  const auto& cfg = j["config"];
  MeasuredNode m;
  m.url = cfg.contains("data") && cfg["data"].is_string() ? cfg["data"].get<std::string>() : "";
  if (m.url.rfind("aquifer://", 0) != 0 && m.url.rfind("aquifers://", 0) != 0) {
    return InvalidArgument(fmt::format(
        "{}: it read '{}', not an aquifer node: measure one with `aquifer bench storage aquifer://NODE/BUCKET/...`",
        where, m.url));
  }
  m.mb_per_second =
      sum.contains("mb_per_second") && sum["mb_per_second"].is_number() ? sum["mb_per_second"].get<double>() : 0;
  if (!(m.mb_per_second > 0)) return InvalidArgument(fmt::format("{}: no MB/s measured", where));
  auto number = [](const nlohmann::json& o, const char* k, double d) {
    return o.contains(k) && o[k].is_number() ? o[k].get<double>() : d;
  };
  const double seconds = number(sum, "seconds", 0), processes = number(cfg, "processes", 1);
  const double readers = number(cfg, "readers", 0) * processes;
  const std::string when = j.contains("started") && j["started"].is_string() ? j["started"].get<std::string>() : "";
  m.source = fmt::format("measured: bench storage on {} with {:g} reader(s) of {} requests for {:.1f} s{}; {}", m.url,
                         readers, units::IecBytes(static_cast<uint64_t>(number(cfg, "request_bytes", 0))), seconds,
                         when.empty() ? "" : ", " + when, where);
  const std::string host = [&] {
    const std::string rest = m.url.substr(m.url.find("://") + 3);
    return rest.substr(0, rest.find('/'));
  }();
  if (host.rfind("127.", 0) == 0 || host.rfind("localhost", 0) == 0 || host.rfind("[::1]", 0) == 0) {
    m.caveats.push_back("the client ran on the node's own machine (" + host +
                        "): they shared its cores, so a node on a host of its own delivers more");
  }
  if (seconds > 0 && seconds < 10) {
    m.caveats.push_back(
        fmt::format("a {:.1f} s run: a node's RAM cache and its disks' own caches weigh more in a "
                    "short run than in an epoch (measure for 30 s or more, with a dataset larger "
                    "than the node's RAM)",
                    seconds));
  }
  m.caveats.push_back(
      "read through one node's URL: on a cluster, blocks held elsewhere came from the other nodes, so this is what "
      "the cluster delivered through that node; measure a node alone (a single-node store on the same hardware) for "
      "a per-node figure");
  return m;
}

Result<ResultDemand> DemandFromTrainResult(const nlohmann::json& j, const std::string& where) {
  if (!j.contains("summary") || !j["summary"].is_object() || !j.contains("config") || !j["config"].is_object()) {
    return InvalidArgument(fmt::format("{}: not a bench result (no summary and config)", where));
  }
  const auto& sum = j["summary"];
  const auto& cfg = j["config"];
  auto number = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
  };
  if (!sum.contains("mb_per_second_per_gpu") || !sum["mb_per_second_per_gpu"].is_number()) {
    return InvalidArgument(fmt::format("{}: not a bench train result (no mb_per_second_per_gpu)", where));
  }
  ResultDemand d;
  d.delivered_mb_per_second_per_gpu = number(sum, "mb_per_second_per_gpu");
  d.au = number(sum, "au");
  d.bound = sum.value("bound", std::string());
  d.gpu_bound = sum.contains("au_ok") && sum["au_ok"].is_boolean() ? sum["au_ok"].get<bool>() : d.bound == "gpu";
  const double gpus = number(cfg, "gpus");
  d.images_per_second_per_gpu = number(cfg, "model_images_per_second_per_gpu");
  if (d.images_per_second_per_gpu <= 0 && gpus > 0) {
    d.images_per_second_per_gpu = number(sum, "demand_images_per_second") / gpus;
  }
  if (d.images_per_second_per_gpu <= 0 && number(cfg, "step_seconds") > 0) {
    d.images_per_second_per_gpu = number(cfg, "batch_size") / number(cfg, "step_seconds");
  }
  d.bytes_per_image = number(sum, "mean_image_bytes");
  if (d.bytes_per_image <= 0 && number(sum, "images") > 0)
    d.bytes_per_image = number(sum, "bytes_read") / number(sum, "images");
  if (d.images_per_second_per_gpu <= 0 || d.bytes_per_image <= 0) {
    return InvalidArgument(fmt::format(
        "{}: the result does not say the GPUs' rate and the bytes per image, so the demand at full utilisation "
        "cannot be computed (rerun bench train with this version)",
        where));
  }
  d.demand_mb_per_second_per_gpu = d.images_per_second_per_gpu * d.bytes_per_image / 1e6;
  const std::string how = fmt::format("{:.0f} images/s per GPU at full utilisation x {:.0f} bytes read per image",
                                      d.images_per_second_per_gpu, d.bytes_per_image);
  if (d.gpu_bound) {
    d.explanation = fmt::format(
        "measured by bench train in {} (GPU-bound, AU {:.1f}%): {} = {:.1f} MB/s; it delivered "
        "{:.1f} MB/s per GPU",
        where, 100 * d.au, how, d.demand_mb_per_second_per_gpu, d.delivered_mb_per_second_per_gpu);
  } else {
    d.explanation = fmt::format(
        "from bench train in {}, which was NOT GPU-bound ({}, AU {:.1f}%): it delivered only {:.1f} MB/s per GPU; at "
        "full utilisation the GPUs demand {} = {:.1f} MB/s per GPU, which is what storage must deliver",
        where, d.bound.empty() ? "input-bound" : d.bound + "-bound", 100 * d.au, d.delivered_mb_per_second_per_gpu, how,
        d.demand_mb_per_second_per_gpu);
  }
  return d;
}

Result<SizeAnswer> Size(const SizeRequest& r) {
  if (!(r.gpus > 0)) return InvalidArgument("the GPU count must be positive");
  if (r.headroom < 0) return InvalidArgument("headroom must be >= 0");
  if (r.spare_nodes < 0) return InvalidArgument("spare nodes must be >= 0");
  if (r.mb_per_second_per_gpu && !(*r.mb_per_second_per_gpu > 0)) {
    return InvalidArgument("the MB/s per GPU must be positive");
  }
  if (r.node_mb_per_second && !(*r.node_mb_per_second > 0)) return InvalidArgument("a node's MB/s must be positive");
  auto w = AQ_TRY(FindWorkload(r.workload));
  const bool measured = r.node == kMeasuredNode;
  if (measured && !r.node_mb_per_second) {
    return InvalidArgument("a measured node needs its MB/s (size --node-from a bench storage result)");
  }
  NodeProfile n;
  if (measured) {
    n.name = kMeasuredNode;
  } else {
    n = AQ_TRY(FindNode(r.node));
  }
  SizeAnswer a;
  auto& as = a.assumptions;
  auto gpn = n.gpus_per_node.find(w.name);
  if (gpn != n.gpus_per_node.end()) a.gpus_per_node = gpn->second;

  std::optional<double> per_gpu = r.mb_per_second_per_gpu ? r.mb_per_second_per_gpu : w.mb_per_second_per_gpu;
  if (r.mb_per_second_per_gpu) {
    as.push_back(fmt::format("demand per GPU: {:g} MB/s ({})", *per_gpu,
                             r.mb_per_second_source.empty() ? "given" : r.mb_per_second_source));
  } else if (per_gpu) {
    as.push_back(fmt::format("demand per GPU: {:g} MB/s for {} on {} ({})", *per_gpu, w.description, w.gpu, w.source));
  } else {
    as.push_back(
        fmt::format("demand per GPU: not stated for {} ({}); sizing by GPUs per node only", w.description, w.source));
  }

  if (r.node_mb_per_second) {
    a.node_mb_per_second = *r.node_mb_per_second;
    as.push_back(fmt::format("one {} node delivers {:.0f} MB/s ({})", measured ? "aquifer" : n.name,
                             a.node_mb_per_second,
                             r.node_mb_per_second_source.empty() ? "given" : r.node_mb_per_second_source));
  } else if (a.gpus_per_node > 0 && w.mb_per_second_per_gpu) {
    a.node_mb_per_second = a.gpus_per_node * *w.mb_per_second_per_gpu;
    as.push_back(
        fmt::format("one {} node delivers {:g} MB/s for this workload: {:g} GPUs per node x {:g} MB/s "
                    "per GPU, as benchmarked ({})",
                    n.name, a.node_mb_per_second, a.gpus_per_node, *w.mb_per_second_per_gpu, n.source));
  } else if (a.gpus_per_node == 0) {
    return NotFound(
        fmt::format("node profile {} has no figure for workload {}; give a node MB/s figure", n.name, w.name));
  }

  if (per_gpu) a.demand_mb_per_second = r.gpus * *per_gpu;
  if (per_gpu && a.node_mb_per_second > 0) {
    a.nodes_exact = a.demand_mb_per_second / a.node_mb_per_second;
  } else {
    if (!(a.gpus_per_node > 0)) {
      return InvalidArgument(fmt::format(
          "workload {} states no MB/s per GPU, and a {} node has no GPUs-per-node figure for it: give the demand "
          "(--mbps-per-gpu, or --from a bench train or doctor result)",
          w.name, n.name));
    }
    a.nodes_exact = r.gpus / a.gpus_per_node;
    as.push_back(fmt::format("nodes = GPUs / {:g} GPUs per {} node", a.gpus_per_node, n.name));
  }
  if (r.headroom > 0) {
    as.push_back(
        fmt::format("headroom: {:.0f}% above the demand (failures, admin jobs, other tenants are not in "
                    "the benchmarked figures)",
                    100 * r.headroom));
  } else {
    as.push_back(
        "no headroom: node failures, drive failures, administrative jobs and other tenants are not in "
        "these figures (add headroom or spare nodes for them)");
  }
  double needed = a.nodes_exact * (1 + r.headroom);
  if (r.dataset_bytes > 0 || r.node_capacity_bytes > 0) {
    if (!(r.dataset_bytes > 0) || !(r.node_capacity_bytes > 0)) {
      return InvalidArgument("sizing capacity needs both the dataset's size and a node's usable capacity");
    }
    if (!(r.stored_ratio > 0) || r.stored_ratio > 1.5) {
      return InvalidArgument(fmt::format("a stored/logical ratio of {:g} is not plausible", r.stored_ratio));
    }
    const double factor = AQ_TRY(ProtectionFactor(r.protection));
    a.stored_bytes = r.dataset_bytes * r.stored_ratio * factor;
    a.capacity_nodes_exact = a.stored_bytes / r.node_capacity_bytes;
    as.push_back(fmt::format(
        "capacity: {} of data x {:.3f} stored/logical ({}) x {:g} for protection {} = {} on disk; {} usable per "
        "node -> {:.2f} nodes",
        units::Bytes(r.dataset_bytes), r.stored_ratio,
        r.stored_ratio_source.empty() ? (r.stored_ratio == 1 ? "no data reduction" : "given") : r.stored_ratio_source,
        factor, r.protection, units::Bytes(a.stored_bytes), units::Bytes(r.node_capacity_bytes),
        a.capacity_nodes_exact));
    if (a.capacity_nodes_exact > needed) {
      needed = a.capacity_nodes_exact;
      a.bound = "capacity";
    }
  }
  // Rounding up tolerates floating-point noise (8.0000000001 nodes is 8).
  a.nodes = static_cast<int>(std::ceil(needed - 1e-9)) + r.spare_nodes;
  if (r.spare_nodes > 0) as.push_back(fmt::format("{} spare node(s) added", r.spare_nodes));
  if (!measured) {
    as.push_back(
        fmt::format("{} spec for comparison: {:g} MB/s sequential read per node", n.name, n.spec_mb_per_second));
  }
  return a;
}

Result<double> ProtectionFactor(const std::string& protection) {
  const std::string p = protection.empty() ? "1x" : protection;
  char* end = nullptr;
  if (p.back() == 'x') {
    const long n = std::strtol(p.c_str(), &end, 10);
    if (end == p.c_str() + p.size() - 1 && n >= 1 && n <= 16) return static_cast<double>(n);
  } else if (const size_t plus = p.find('+'); plus != std::string::npos) {
    const long k = std::strtol(p.c_str(), &end, 10);
    const bool k_ok = end == p.c_str() + plus;
    const bool m_digits = plus + 1 < p.size() && std::isdigit(static_cast<unsigned char>(p[plus + 1]));
    const long m = std::strtol(p.c_str() + plus + 1, &end, 10);
    if (k_ok && m_digits && end == p.c_str() + p.size() && k >= 1 && m >= 0 && k + m <= 64) {
      return static_cast<double>(k + m) / static_cast<double>(k);
    }
  }
  return InvalidArgument(fmt::format("protection '{}': expected NUMBERx (replicas, e.g. 3x) or K+M (e.g. 8+2)", p));
}

nlohmann::json ToJson(const SizeRequest& r, const SizeAnswer& a) {
  return {{"gpus", r.gpus},
          {"dataset_bytes", r.dataset_bytes},
          {"node_capacity_bytes", r.node_capacity_bytes},
          {"stored_ratio", r.stored_ratio},
          {"protection", r.protection},
          {"stored_bytes", a.stored_bytes},
          {"capacity_nodes_exact", a.capacity_nodes_exact},
          {"bound", a.bound},
          {"workload", r.workload},
          {"node", r.node},
          {"headroom", r.headroom},
          {"spare_nodes", r.spare_nodes},
          {"demand_mb_per_second", a.demand_mb_per_second},
          {"node_mb_per_second", a.node_mb_per_second},
          {"gpus_per_node", a.gpus_per_node},
          {"nodes_exact", a.nodes_exact},
          {"nodes", a.nodes},
          {"assumptions", a.assumptions}};
}

std::vector<SizingRow> SizingTable() {
  std::vector<SizingRow> rows;
  for (const auto& w : WorkloadProfiles()) {
    if (w.demand.empty()) continue;  // not a row of the documents' table
    SizingRow row{w.demand, w.description, w.mb_per_second_per_gpu, {}};
    for (const auto& n : NodeProfiles()) {
      auto it = n.gpus_per_node.find(w.name);
      if (it != n.gpus_per_node.end()) row.gpus_per_node[n.name] = it->second;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace aq::bench
