#include "s3/node_stats_doc.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace aq::s3 {

LatencySummary LatencySummary::Of(const LatencyHistogram& h) {
  LatencySummary s;
  s.count = h.count();
  s.mean_us = h.mean_ns() / 1e3;
  s.p50_us = h.Quantile(0.50) / 1e3;
  s.p90_us = h.Quantile(0.90) / 1e3;
  s.p99_us = h.Quantile(0.99) / 1e3;
  s.p999_us = h.Quantile(0.999) / 1e3;
  s.max_us = static_cast<double>(h.max_ns()) / 1e3;
  return s;
}

NodeStatsDoc::Throughput NodeStatsDoc::MachineThroughput() const {
  auto ends = [](const std::string& k, std::string_view tail) {
    return k.size() >= tail.size() && k.compare(k.size() - tail.size(), tail.size(), tail) == 0;
  };
  Throughput t;
  for (const auto& [k, v] : machine) {
    if (k.rfind("net.", 0) == 0 && ends(k, ".rx")) t.net_in += v;
    if (k.rfind("net.", 0) == 0 && ends(k, ".tx")) t.net_out += v;
    if (k.rfind("disk.", 0) == 0 && ends(k, ".read")) t.disk_in += v;
    if (k.rfind("disk.", 0) == 0 && ends(k, ".write")) t.disk_out += v;
  }
  return t;
}

namespace {

// Each struct's fields, named once: Fields(doc, f) calls f(name, member) for
// every member, for the writer and the reader alike.
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, LatencySummary>
void Fields(D& d, F&& f) {
  f("count", d.count), f("mean_us", d.mean_us), f("p50_us", d.p50_us), f("p90_us", d.p90_us);
  f("p99_us", d.p99_us), f("p999_us", d.p999_us), f("max_us", d.max_us);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, OpStatsDoc>
void Fields(D& d, F&& f) {
  f("requests", d.requests), f("client_errors", d.client_errors), f("server_errors", d.server_errors);
  f("bytes_in", d.bytes_in), f("bytes_out", d.bytes_out), f("latency", d.latency);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, CacheStatsDoc>
void Fields(D& d, F&& f) {
  f("policy", d.policy), f("capacity_bytes", d.capacity_bytes), f("bytes", d.bytes), f("entries", d.entries);
  f("hits", d.hits), f("misses", d.misses), f("hit_ratio", d.hit_ratio), f("evicted", d.evicted);
  f("rejected", d.rejected);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, L3StatsDoc>
void Fields(D& d, F&& f) {
  f("path", d.path), f("capacity_bytes", d.capacity_bytes), f("bytes", d.bytes), f("entries", d.entries);
  f("hits", d.hits), f("misses", d.misses), f("hit_ratio", d.hit_ratio), f("admitted", d.admitted);
  f("evicted", d.evicted), f("rejected", d.rejected), f("dropped", d.dropped), f("damaged", d.damaged);
  f("restored", d.restored), f("queued_writes", d.queued_writes), f("queued_bytes", d.queued_bytes);
  f("write_errors", d.write_errors);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, PrefetchStatsDoc>
void Fields(D& d, F&& f) {
  f("issued", d.issued), f("hits", d.hits), f("late_hits", d.late_hits), f("wasted", d.wasted);
  f("continued_streams", d.continued_streams), f("new_streams", d.new_streams), f("bytes_held", d.bytes_held);
  f("window_blocks", d.window_blocks), f("memory_bytes", d.memory_bytes);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, StagingStatsDoc>
void Fields(D& d, F&& f) {
  f("planned", d.planned), f("staged", d.staged), f("shared", d.shared), f("resident", d.resident);
  f("hits", d.hits), f("late_hits", d.late_hits), f("expired", d.expired), f("skipped", d.skipped);
  f("failed", d.failed), f("bytes_held", d.bytes_held), f("queued", d.queued), f("reading", d.reading);
  f("streams", d.streams), f("memory_bytes", d.memory_bytes), f("threads", d.threads);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, ReclaimStatsDoc>
void Fields(D& d, F&& f) {
  f("freed", d.freed), f("removed", d.removed), f("deferred", d.deferred), f("forced", d.forced);
  f("early", d.early), f("pending", d.pending), f("readers", d.readers);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, DedupWritesDoc>
void Fields(D& d, F&& f) {
  f("written", d.written), f("found", d.found), f("found_bytes", d.found_bytes), f("repaired", d.repaired);
  f("kept", d.kept), f("hash_seconds", d.hash_seconds);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, CompressionWritesDoc>
void Fields(D& d, F&& f) {
  f("compressed", d.compressed), f("plain", d.plain), f("logical_bytes", d.logical_bytes);
  f("stored_bytes", d.stored_bytes), f("seconds", d.seconds), f("decompressed", d.decompressed);
  f("decompress_seconds", d.decompress_seconds);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, PoolStatsDoc>
void Fields(D& d, F&& f) {
  f("name", d.name), f("blocks", d.blocks), f("bytes", d.bytes), f("logical_bytes", d.logical_bytes);
  f("compressed_blocks", d.compressed_blocks), f("shared_blocks", d.shared_blocks);
  f("dedup_saved_bytes", d.dedup_saved_bytes), f("ratio", d.ratio), f("dedup_writes", d.dedup_writes);
  f("compression_writes", d.compression_writes), f("media", d.media), f("compression", d.compression);
  f("dedup", d.dedup), f("size_bytes", d.size_bytes), f("available_bytes", d.available_bytes);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, ScrubFindingDoc>
void Fields(D& d, F&& f) {
  f("object", d.object), f("piece", d.piece), f("problem", d.problem), f("repaired", d.repaired);
  f("repair_error", d.repair_error), f("quarantined", d.quarantined), f("also", d.also);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, QuarantinedDoc>
void Fields(D& d, F&& f) { f("path", d.path), f("bytes", d.bytes); }
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, ScrubStatsDoc>
void Fields(D& d, F&& f) {
  f("enabled", d.enabled), f("bytes_per_second", d.bytes_per_second), f("interval_seconds", d.interval_seconds);
  f("running", d.running), f("passes", d.passes), f("last_pass_seconds", d.last_pass_seconds);
  f("last_pass_ended_seconds_ago", d.last_pass_ended_seconds_ago), f("pieces_in_pass", d.pieces_in_pass);
  f("pieces_done_in_pass", d.pieces_done_in_pass), f("pieces_verified", d.pieces_verified);
  f("bytes_verified", d.bytes_verified), f("corrupt", d.corrupt), f("missing", d.missing);
  f("repaired", d.repaired), f("repair_errors", d.repair_errors), f("unrepaired", d.unrepaired);
  f("objects_at_risk", d.objects_at_risk), f("quarantined", d.quarantined);
  f("quarantined_bytes", d.quarantined_bytes), f("quarantine", d.quarantine), f("findings", d.findings);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, SameHostStatsDoc>
void Fields(D& d, F&& f) {
  f("grants", d.grants), f("granted_blocks", d.granted_blocks), f("fetches", d.fetches);
  f("blocks_sent", d.blocks_sent), f("files_sent", d.files_sent), f("blocks_gone", d.blocks_gone);
  f("refused", d.refused);
  f("created", d.created), f("evicted", d.evicted), f("shared", d.shared), f("shared_bytes", d.shared_bytes);
  f("memory_bytes", d.memory_bytes);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, UploadStatsDoc>
void Fields(D& d, F&& f) {
  f("in_progress", d.in_progress), f("parts", d.parts), f("part_bytes", d.part_bytes);
  f("oldest_age_seconds", d.oldest_age_seconds), f("expired", d.expired), f("expired_bytes", d.expired_bytes);
  f("expiry_seconds", d.expiry_seconds), f("sweep_errors", d.sweep_errors), f("last_error", d.last_error);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, ConnectionStatsDoc>
void Fields(D& d, F&& f) {
  f("open", d.open), f("accepted", d.accepted), f("requests", d.requests);
  f("refused_overload", d.refused_overload), f("header_timeouts", d.header_timeouts);
  f("idle_closed", d.idle_closed), f("bad_heads", d.bad_heads), f("tls_failures", d.tls_failures);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, ClusterBlockStatsDoc>
void Fields(D& d, F&& f) {
  f("local_reads", d.local_reads), f("remote_reads", d.remote_reads), f("failovers", d.failovers);
  f("repaired_on_read", d.repaired_on_read), f("stray_reads", d.stray_reads);
  f("replicas_written", d.replicas_written), f("remote_writes", d.remote_writes);
  f("stripe_reads", d.stripe_reads), f("degraded_reads", d.degraded_reads);
  f("fragments_written", d.fragments_written);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, RepairStatsDoc>
void Fields(D& d, F&& f) {
  f("passes", d.passes), f("objects", d.objects), f("blocks", d.blocks), f("under_protected", d.under_protected);
  f("misplaced", d.misplaced), f("fully_protected", d.fully_protected), f("last_pass_seconds", d.last_pass_seconds);
  f("copied", d.copied), f("bytes_copied", d.bytes_copied), f("dropped", d.dropped);
  f("drops_pending", d.drops_pending), f("reprotected", d.reprotected), f("tiered", d.tiered);
  f("bytes_tiered", d.bytes_tiered), f("tier_misplaced", d.tier_misplaced), f("tier_blocked", d.tier_blocked);
  f("layouts_committed", d.layouts_committed), f("conflicts", d.conflicts), f("errors", d.errors);
  f("last_error", d.last_error);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, ClusterStatsDoc>
void Fields(D& d, F&& f) {
  f("node", d.node), f("replicas", d.replicas), f("policy", d.policy), f("bucket_policies", d.bucket_policies);
  f("nodes_known", d.nodes_known), f("rejoins", d.rejoins), f("blocks", d.blocks), f("repair", d.repair);
}
template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, NodeStatsDoc>
void Fields(D& d, F&& f) {
  f("uptime_seconds", d.uptime_seconds), f("ops", d.ops), f("client_errors", d.client_errors);
  f("server_errors", d.server_errors), f("errors_by_status", d.errors_by_status), f("bytes_in", d.bytes_in);
  f("bytes_out", d.bytes_out), f("denied", d.denied), f("cache", d.cache), f("l3", d.l3);
  f("prefetch", d.prefetch), f("staging", d.staging), f("reclaim", d.reclaim), f("pools", d.pools);
  f("machine", d.machine), f("scrub", d.scrub), f("same_host", d.same_host), f("uploads", d.uploads);
  f("connections", d.connections), f("cluster", d.cluster);
}

template <class D, class F>
requires std::is_same_v<std::remove_const_t<D>, MemberStatusDoc>
void Fields(D& d, F&& f) {
  f("get_per_second", d.get_per_second), f("bytes_out", d.bytes_out), f("cache_hits", d.cache_hits);
  f("cache_misses", d.cache_misses), f("cache_bytes", d.cache_bytes), f("remote_reads", d.remote_reads);
  f("pool_bytes", d.pool_bytes), f("pool_logical_bytes", d.pool_logical_bytes), f("repair", d.repair);
  f("scrub", d.scrub);
}

template <class T>
concept Document = requires(T& t) {
  Fields(t, [](const char*, auto&) {});
};

// --- writing ---

template <class T>
nlohmann::json EncodeValue(const T& v) {
  if constexpr (Document<T>) {
    nlohmann::json j = nlohmann::json::object();
    Fields(v, [&j](const char* k, const auto& member) {
      using M = std::remove_cvref_t<decltype(member)>;
      if constexpr (requires { member.has_value(); }) {  // an absent optional is left out
        if (member.has_value()) j[k] = EncodeValue<typename M::value_type>(*member);
      } else {
        j[k] = EncodeValue<M>(member);
      }
    });
    return j;
  } else if constexpr (requires { typename T::mapped_type; }) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, x] : v) j[k] = EncodeValue<typename T::mapped_type>(x);
    return j;
  } else if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& x : v) j.push_back(EncodeValue<typename T::value_type>(x));
    return j;
  } else {
    return nlohmann::json(v);
  }
}

// --- reading ---

// Reads `j` into `v`; on a type mismatch sets *err naming `path`. null
// reads as the default (a NaN the writer had is written as null).
template <class T>
void Decode(const nlohmann::json& j, T& v, const std::string& path, Status* err) {
  auto wrong = [&](const char* want) { *err = Corruption(fmt::format("{} is {}, not {}", path, j.type_name(), want)); };
  if (j.is_null()) return;
  if constexpr (Document<T>) {
    if (!j.is_object()) return wrong("an object");
    Fields(v, [&](const char* k, auto& member) {
      if (!err->ok()) return;
      auto it = j.find(k);
      if (it == j.end()) return;
      Decode(*it, member, path.empty() ? k : path + "." + k, err);
    });
  } else if constexpr (requires { v.has_value(); }) {
    typename T::value_type x{};
    Decode(j, x, path, err);
    if (err->ok()) v = std::move(x);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return wrong("a string");
    v = j.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return wrong("true or false");
    v = j.get<bool>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!j.is_number() || !std::isfinite(j.get<double>())) return wrong("a finite number");
    v = j.get<double>();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    if (j.is_number_unsigned()) {
      v = j.get<uint64_t>();
    } else if (j.is_number() && j.get<double>() >= 0 && j.get<double>() < 18446744073709551616.0) {
      // a count a writer kept as a double
      v = static_cast<uint64_t>(j.get<double>());
    } else {
      return wrong("a count");
    }
  } else if constexpr (requires { typename T::mapped_type; }) {
    if (!j.is_object()) return wrong("an object");
    for (auto it = j.begin(); it != j.end() && err->ok(); ++it) {
      typename T::mapped_type x{};
      Decode(*it, x, path + "." + it.key(), err);
      v[it.key()] = std::move(x);
    }
  } else {  // a vector
    if (!j.is_array()) return wrong("an array");
    for (size_t i = 0; i < j.size() && err->ok(); ++i) {
      typename T::value_type x{};
      Decode(j[i], x, fmt::format("{}[{}]", path, i), err);
      v.push_back(std::move(x));
    }
  }
}

}  // namespace

nlohmann::json ToJson(const NodeStatsDoc& doc) {
  nlohmann::json j = EncodeValue(doc);
  j["bodies"] = {{"resumed", doc.bodies_resumed}, {"cut", doc.bodies_cut}};
  return j;
}

Result<NodeStatsDoc> ParseNodeStatsDoc(const nlohmann::json& j) {
  if (!j.is_object()) return Corruption(fmt::format("node stats: the document is {}, not an object", j.type_name()));
  NodeStatsDoc doc;
  Status err;
  // The machine's values: numbers only (a NaN was written as null).
  nlohmann::json rest = j;
  if (auto m = rest.find("machine"); m != rest.end()) {
    if (m->is_object()) {
      for (auto it = m->begin(); it != m->end(); ++it) {
        if (it->is_number()) doc.machine[it.key()] = it->get<double>();
      }
    }
    rest.erase(m);
  }
  Decode(rest, doc, "", &err);
  if (err.ok()) {
    if (auto b = j.find("bodies"); b != j.end() && b->is_object()) {
      Decode(b->value("resumed", nlohmann::json()), doc.bodies_resumed, "bodies.resumed", &err);
      if (err.ok()) Decode(b->value("cut", nlohmann::json()), doc.bodies_cut, "bodies.cut", &err);
    }
  }
  if (!err.ok()) return Corruption(fmt::format("node stats: {}", err.message()));
  return doc;
}

nlohmann::json ToJson(const MemberStatusDoc& doc) { return EncodeValue(doc); }

Result<MemberStatusDoc> ParseMemberStatusDoc(std::string_view text) {
  MemberStatusDoc doc;
  if (text.empty()) return doc;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Corruption("member status: not JSON");
  if (!j.is_object()) return Corruption(fmt::format("member status: the record is {}, not an object", j.type_name()));
  Status err;
  Decode(j, doc, "", &err);
  if (!err.ok()) return Corruption(fmt::format("member status: {}", err.message()));
  return doc;
}

Result<NodeStatsDoc> ParseNodeStatsDoc(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Corruption("node stats: not JSON");
  return ParseNodeStatsDoc(j);
}

}  // namespace aq::s3
