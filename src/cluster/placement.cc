#include "cluster/placement.h"

#include <algorithm>
#include <map>

#include "store/block_store.h"

namespace aq::cluster {
namespace {

uint64_t Fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t Mix(uint64_t z) {  // SplitMix64's finalizer: spreads FNV's weak low bits
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t PlacementWeight(const std::string& block_id, const std::string& node_id) {
  uint64_t h = Fnv1a(0xcbf29ce484222325ull, block_id);
  h = Fnv1a(h ^ 0xff, node_id);
  return Mix(h);
}

bool HasPool(const NodeInfo& node, const std::string& pool) {
  return pool.empty() || node.pools.empty() ||
         std::find(node.pools.begin(), node.pools.end(), pool) != node.pools.end();
}

std::vector<std::vector<store::PoolConfig>> MemberPools(const std::vector<NodeInfo>& nodes) {
  std::vector<std::vector<store::PoolConfig>> members;
  for (const auto& n : nodes) {
    if (!n.up || n.state != NodeState::kActive) continue;
    auto& pools = members.emplace_back();
    for (size_t i = 0; i < n.pools.size() && i < n.pool_media.size(); ++i) {
      pools.push_back({.name = n.pools[i], .media = n.pool_media[i]});
    }
  }
  return members;
}

std::vector<std::string> Place(const std::string& block_id, const std::vector<NodeInfo>& nodes, size_t replicas,
                               const std::string& pool) {
  std::vector<std::pair<uint64_t, const std::string*>> scored;
  for (const auto& n : nodes) {
    if (n.up && n.state == NodeState::kActive && HasPool(n, pool))
      scored.emplace_back(PlacementWeight(block_id, n.id), &n.id);
  }
  const size_t k = std::min(replicas, scored.size());
  std::partial_sort(
      scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : *a.second < *b.second; });
  std::vector<std::string> out;
  for (size_t i = 0; i < k; ++i) out.push_back(*scored[i].second);
  return out;
}

s3::Layout LayoutFor(const store::ObjectMeta& o, const std::vector<NodeInfo>& nodes) {
  std::map<std::string, const NodeInfo*> map;
  for (const auto& n : nodes) map[n.id] = &n;
  s3::Layout l;
  l.size = o.size;
  l.version = o.version;
  l.etag = o.etag;
  for (const auto& b : o.blocks) {
    std::vector<std::string> holders = b.nodes;
    auto up = [&](const std::string& id) {
      auto it = map.find(id);
      return it != map.end() && it->second->up;
    };
    std::stable_sort(holders.begin(), holders.end(), [&](const std::string& x, const std::string& y) {
      if (up(x) != up(y)) return up(x);
      return PlacementWeight(b.id, x) > PlacementWeight(b.id, y);
    });
    s3::LayoutBlock lb;
    lb.id = b.id;
    lb.size = b.size;
    lb.crc32c = b.crc32c;
    lb.pool = b.pool;
    if (b.erasure_coded()) {
      // Every fragment with its holder, data first: clients read the data
      // fragments and reconstruct a range from others when one fails.
      lb.k = b.ec_k;
      for (int i = 0; i < b.ec_k + b.ec_m && static_cast<size_t>(i) < b.nodes.size(); ++i) {
        const auto piece = store::FragmentRef(b, i);
        s3::LayoutFragment f{piece.id, piece.size, piece.crc32c, {}};
        if (auto it = map.find(b.nodes[i]); it != map.end() && it->second->up)
          f.addresses.push_back(it->second->address);
        lb.fragments.push_back(std::move(f));
      }
      l.blocks.push_back(std::move(lb));
      continue;
    }
    for (const auto& h : holders) {
      if (auto it = map.find(h); it != map.end()) lb.addresses.push_back(it->second->address);
    }
    l.blocks.push_back(std::move(lb));
  }
  return l;
}

}  // namespace aq::cluster
