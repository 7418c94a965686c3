#include "store/scrubber.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "common/clock.h"
#include "common/log.h"
#include "store/stager.h"

namespace aq::store {
void PiecesHeldBy(const ObjectMeta& o, const std::string& self, std::vector<ExpectedPiece>* out) {
  const std::string object = o.bucket + "/" + o.key;
  for (const auto& b : o.blocks) {
    if (b.nodes.empty() || self.empty()) {  // a single node's block, or written before the node joined
      out->push_back({b, b, -1, object});
      continue;
    }
    int i = 0;
    for (const auto& [holder, piece] : StoredPieces(b)) {
      if (holder == self) out->push_back({piece, b, b.erasure_coded() ? i : -1, object});
      ++i;
    }
  }
}

Scrubber::Scrubber(BlockStore& store, ListExpected expected, Repair repair, ScrubOptions options)
    : store_(store),
      clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
      expected_(std::move(expected)),
      repair_(std::move(repair)),
      o_(std::move(options)) {
  MutexLock lock(mu_);
  stats_.enabled = o_.bytes_per_second > 0;
}

Scrubber::~Scrubber() { Stop(); }

void Scrubber::Start() {
  if (o_.bytes_per_second <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Scrubber::Stop() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Scrubber::WaitFor(double seconds, const std::atomic<bool>* stop) {
  auto stopped = [&] { return stop != nullptr && stop->load(); };
  if (&clock_ == &Clock::Real()) {
    std::unique_lock<std::mutex> lock(wake_mu_);
    wake_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, seconds)), stopped);
    return !stopped();
  }
  // Another clock moves when its owner moves it: look again every 20 ms.
  const double until = clock_.Now() + seconds;
  while (!stopped() && clock_.Now() < until) {
    std::unique_lock<std::mutex> lock(wake_mu_);
    wake_.wait_for(lock, std::chrono::milliseconds(20), stopped);
  }
  return !stopped();
}

void Scrubber::Loop() {
  // The first pass waits a little: a node that just started has other work.
  double next = clock_.Now() + std::min(o_.interval_s, 5.0);
  while (!stop_) {
    if (!WaitFor(next - clock_.Now(), &stop_)) return;
    const double started = clock_.Now();
    auto r = RunPass(&stop_);
    if (!r.ok()) log::warn("scrub: the pass stopped: {}", r.status().message());
    next = started + o_.interval_s;
  }
}

Result<std::vector<ScrubFinding>> Scrubber::RunPass(const std::atomic<bool>* stop) {
  std::lock_guard<std::mutex> one(pass_mu_);
  const double t0 = clock_.Now();
  std::vector<ExpectedPiece> expected;
  std::vector<std::vector<std::string>> also;  // per piece: the other objects naming it
  {
    std::unordered_map<std::string, size_t> seen;  // id@pool -> index in expected
    for (auto& e : AQ_TRY(expected_())) {
      auto [it, fresh] = seen.emplace(e.piece.id + "@" + e.piece.pool, expected.size());
      if (!fresh) {
        also[it->second].push_back(e.object);
        continue;
      }
      expected.push_back(std::move(e));
      also.emplace_back();
    }
  }
  {
    MutexLock lock(mu_);
    stats_.running = true;
    stats_.pieces_in_pass = expected.size();
    stats_.pieces_done_in_pass = 0;
  }
  std::vector<std::pair<size_t, std::string>> bad;      // piece (index), problem
  RateLimiter pace(o_.bytes_per_second, 0.05, clock_);  // the pass never reads faster than its budget
  for (size_t i = 0; i < expected.size(); ++i) {
    const ExpectedPiece& e = expected[i];
    if (stop != nullptr && stop->load()) break;
    Status s = store_.Read(e.piece, 0, 0).status();  // reads and checks the whole piece
    const double factor = o_.busy && o_.busy() ? kYieldFactor : 1;
    const double wait = pace.Reserve(static_cast<uint64_t>(static_cast<double>(e.piece.size) * factor));
    {
      MutexLock lock(mu_);
      ++stats_.pieces_done_in_pass;
      if (s.ok() || s.code() == StatusCode::kCorruption) {
        ++stats_.pieces_verified;
        stats_.bytes_verified += e.piece.size;
      }
    }
    if (s.code() == StatusCode::kCorruption) {
      bad.emplace_back(i, "corrupt: " + s.message());
    } else if (s.code() == StatusCode::kNotFound) {
      bad.emplace_back(i, "missing");
    } else if (!s.ok()) {
      log::warn("scrub: {} of {}: {}", e.piece.id, e.object, s.message());
    }
    if (wait > 0 && &clock_ != &Clock::Real()) {
      clock_.SleepFor(wait);  // a test's clock: the pacing moves it
    } else if (wait > 0) {
      WaitFor(wait, stop);
    }
  }
  // The file is read again before anything is removed: a piece rebuilt
  // meanwhile (a reader's repair, the repairer) is whole now, and one
  // removed meanwhile (re-protection, a delete) is missing, not corrupt.
  std::vector<std::pair<size_t, std::string>> still_bad;
  for (auto& [i, problem] : bad) {
    const Status again = store_.Read(expected[i].piece, 0, 0).status();
    if (again.ok()) continue;
    still_bad.emplace_back(i, again.code() == StatusCode::kNotFound ? "missing" : std::move(problem));
  }
  // Only what the metadata still names is damage: an object deleted or
  // rewritten during the pass took its pieces with it.
  std::set<std::string> still;
  if (!still_bad.empty()) still = AQ_TRY(Named());
  std::vector<ScrubFinding> findings;
  for (auto& [i, problem] : still_bad) {
    const ExpectedPiece& e = expected[i];
    if (!still.count(e.piece.id + "@" + e.piece.pool)) continue;
    auto f = Rebuild(e, problem);
    if (!f) continue;
    findings.push_back(std::move(*f));
    findings.back().also = std::move(also[i]);
  }
  Record(findings, t0);
  return findings;
}

Result<std::set<std::string>> Scrubber::Named() {
  std::set<std::string> named;
  for (const auto& e : AQ_TRY(expected_())) named.insert(e.piece.id + "@" + e.piece.pool);
  return named;
}

ScrubStats Scrubber::Stats() const {
  MutexLock lock(mu_);
  ScrubStats s = stats_;
  s.last_pass_ended_s_ago = last_end_ < 0 ? -1 : clock_.Now() - last_end_;
  return s;
}

// A bad piece removed and rebuilt from the block's other copies (when
// there is a repair callback), and the finding that says how it went.
// The damaged file is never deleted here: it is moved into the pool's
// quarantine/ folder (out of the rebuilt copy's way), dropped once a
// rebuild succeeded, and kept when none did: when every copy of a block is
// damaged, what a person or a partial decode could still recover stays.
// Nothing: the file went away meanwhile and the metadata no longer names it.
std::optional<ScrubFinding> Scrubber::Rebuild(const ExpectedPiece& e, const std::string& problem) {
  ScrubFinding f{e.object, e.piece.id, problem, false, {}, {}};
  if (!repair_) {
    log::warn("scrub: piece {} of {} is {}", e.piece.id, e.object, problem);
    f.repair_error = "no other copy to rebuild it from";
    return f;  // the file stays where it is: readers get its checksum error
  }
  std::string aside;
  if (problem != "missing") {
    auto q = store_.Quarantine(e.piece);
    if (!q.ok() && q.status().code() == StatusCode::kNotFound) {
      // Removed since it was read (re-protection, a delete, a rebalance):
      // damage only if the metadata still names it, and then it is missing.
      auto named = Named();
      if (named.ok() && !named->count(e.piece.id + "@" + e.piece.pool)) return std::nullopt;
      f.problem = "missing";
    } else if (!q.ok()) {
      f.repair_error = "could not set the damaged file aside, so it was left in place: " + q.status().message();
      log::warn("scrub: piece {} of {} is {}; {}", e.piece.id, e.object, problem, f.repair_error);
      return f;
    } else {
      aside = *q;
    }
  }
  log::warn("scrub: piece {} of {} is {}", e.piece.id, e.object, f.problem);
  Status r = repair_(e);
  f.repaired = r.ok() && store_.Read(e.piece, 0, 0).ok();
  if (!f.repaired) f.repair_error = r.ok() ? "rebuilt, but it does not read back whole" : r.message();
  if (f.repaired) {
    log::info("scrub: piece {} of {} rebuilt", e.piece.id, e.object);
    if (!aside.empty()) (void)store_.DropQuarantined(aside);
  } else {
    f.quarantined = aside;
    log::error("scrub: piece {} of {} could not be rebuilt: {}{}", e.piece.id, e.object, f.repair_error,
               aside.empty() ? "" : "; its damaged bytes are kept in " + aside);
  }
  return f;
}

// A pass's findings into the stats.
void Scrubber::Record(const std::vector<ScrubFinding>& findings, double t0) {
  MutexLock lock(mu_);
  stats_.running = false;
  ++stats_.passes;
  stats_.last_pass_seconds = clock_.Now() - t0;
  last_end_ = clock_.Now();
  stats_.unrepaired = 0;
  stats_.objects_at_risk.clear();
  stats_.last_findings.clear();
  std::set<std::string> at_risk;
  for (const auto& f : findings) {
    (f.problem == "missing" ? stats_.missing : stats_.corrupt) += 1;
    if (f.repaired) {
      ++stats_.repaired;
    } else {
      ++stats_.unrepaired;
      if (repair_) ++stats_.repair_errors;
      auto risk = [&](const std::string& object) AQ_REQUIRES(mu_) {
        if (at_risk.insert(object).second && stats_.objects_at_risk.size() < 100) {
          stats_.objects_at_risk.push_back(object);
        }
      };
      risk(f.object);
      for (const auto& object : f.also) risk(object);
    }
    if (stats_.last_findings.size() < 100) stats_.last_findings.push_back(f);
  }
  auto aside = store_.Quarantined();
  stats_.quarantined = aside.size();
  stats_.quarantined_bytes = 0;
  for (const auto& q : aside) stats_.quarantined_bytes += q.second;
  if (aside.size() > 100) aside.resize(100);
  stats_.quarantine = std::move(aside);
}

}  // namespace aq::store
