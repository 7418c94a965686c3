// aquifer size: how many storage nodes N GPUs need, the documents' method
// made explicit. A workload profile gives the storage throughput one GPU
// demands (MB/s per GPU, SI); a node profile gives, per workload, how many
// GPUs one node fed in the documents' benchmarks, hence the MB/s one node
// delivers for that workload (GPUs per node x MB/s per GPU). Then
//   demand = GPUs x MB/s per GPU
//   nodes  = demand x (1 + headroom) / node MB/s, rounded up, + spare nodes
// With a dataset size and a node's usable capacity, capacity is sized too,
// in physical bytes:
//   stored = dataset x stored/logical ratio (measured on a node whose pools
//            compress; 1 without) x protection (3 for 3 replicas, 1.25 for 8+2)
//   nodes  = the larger of the two counts, rounded up, + spare nodes
// Every figure used is returned as an assumption line with its source.
//
// Thread safety: the profile tables are immutable; functions are reentrant.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace aq::bench {

struct WorkloadProfile {
  std::string name;                             // resnet50-train-small, ...
  std::string demand;                           // low, medium, high
  std::string description;                      // "training, small images, ResNet-50"
  std::string gpu;                              // the GPU the figure is for
  std::optional<double> mb_per_second_per_gpu;  // unset where the sources give only GPUs per node
  std::string source;
};

struct NodeProfile {
  std::string name;  // f800, h500
  std::string description;
  std::map<std::string, double> gpus_per_node;  // by workload name
  double spec_mb_per_second = 0;                // vendor sequential-read figure per node
  std::string source;
};

const std::vector<WorkloadProfile>& WorkloadProfiles();
const std::vector<NodeProfile>& NodeProfiles();
Result<WorkloadProfile> FindWorkload(const std::string& name);
Result<NodeProfile> FindNode(const std::string& name);

struct SizeRequest {
  double gpus = 0;
  std::string workload = "resnet50-train-small";
  std::string node = "f800";  // a node profile; "measured" with node_mb_per_second from an aquifer node
  std::optional<double> mb_per_second_per_gpu;  // overrides the profile (or a measured result)
  std::string mb_per_second_source;             // where the override came from
  std::optional<double> node_mb_per_second;     // overrides the node's benchmarked MB/s
  std::string node_mb_per_second_source;        // where that figure came from ("" = given)
  double headroom = 0;                          // 0.2 = plan for 20% more than the demand
  int spare_nodes = 0;                          // e.g. 1 to stay sized with one node failed
  // Capacity (0: not sized): the dataset's logical bytes and one node's usable bytes.
  double dataset_bytes = 0;
  double node_capacity_bytes = 0;
  double stored_ratio = 1;          // physical / logical bytes (data reduction)
  std::string stored_ratio_source;  // where the ratio came from ("" = given or none)
  std::string protection = "1x";    // "3x" (replicas) or "K+M" (erasure code)
};

// Raw bytes per logical byte of a protection: "3x" -> 3, "8+2" -> 1.25.
Result<double> ProtectionFactor(const std::string& protection);

struct SizeAnswer {
  double demand_mb_per_second = 0;  // 0 when the workload gives no MB/s and none was given
  double node_mb_per_second = 0;
  double gpus_per_node = 0;  // for this workload
  double nodes_exact = 0;    // before rounding up, without headroom
  int nodes = 0;             // rounded up, with headroom and spare nodes
  // Capacity, when sized: the physical bytes to store and the nodes they need.
  double stored_bytes = 0;
  double capacity_nodes_exact = 0;
  std::string bound = "throughput";  // which count decided: throughput or capacity
  std::vector<std::string> assumptions;
};

Result<SizeAnswer> Size(const SizeRequest& request);

// What a `bench train` result says one GPU demands of storage. A run that
// was not GPU-bound delivered less than its GPUs wanted: its MB/s per GPU
// is what the input pipeline managed, not the demand. The demand at full
// utilisation is the simulated GPU's rate times the bytes read per image:
//   demand per GPU = images/s per GPU at full AU x bytes read per image
// (the rate from the model, or batch / step time; bytes per image from
// the bytes the run read over the images it decoded).
struct ResultDemand {
  double delivered_mb_per_second_per_gpu = 0;  // measured
  double demand_mb_per_second_per_gpu = 0;     // at full utilisation
  double images_per_second_per_gpu = 0;        // the GPU's rate at full utilisation
  double bytes_per_image = 0;
  double au = 0;
  std::string bound;  // gpu, storage, decode ("" in older results)
  bool gpu_bound = false;
  std::string explanation;  // how the demand was found, with both figures
};
Result<ResultDemand> DemandFromTrainResult(const nlohmann::json& result, const std::string& where);
// What an `aquifer doctor` result says one GPU demands with the image form
// `form` ("" = the form the doctor picked): the GPU's images/s x that
// form's bytes per image.
Result<ResultDemand> DemandFromDoctorResult(const nlohmann::json& result, const std::string& where,
                                            const std::string& form);

// aquifer's own nodes, measured: what a `bench storage` result read from an
// aquifer node (aquifer://, aquifers://) says one node delivers. The figure
// is the run's MB/s; the source line says how it was measured and what it
// leaves out (a client sharing the node's cores, a cluster behind the URL,
// a run too short or from the node's RAM cache).
struct MeasuredNode {
  double mb_per_second = 0;
  std::string url;
  std::string source;  // for the assumption line
  std::vector<std::string> caveats;
};
Result<MeasuredNode> NodeFromStorageResult(const nlohmann::json& result, const std::string& where);

nlohmann::json ToJson(const SizeRequest& request, const SizeAnswer& answer);

// The documents' sizing table, computed from the profiles: one row per
// workload with MB/s per GPU and GPUs per node for every node profile.
struct SizingRow {
  std::string demand, description;
  std::optional<double> mb_per_second_per_gpu;
  std::map<std::string, double> gpus_per_node;
};
std::vector<SizingRow> SizingTable();

}  // namespace aq::bench
