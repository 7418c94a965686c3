// The live dashboard a node serves on its metrics address (/dashboard): one
// self-contained HTML page (inline style and script, nothing fetched but
// /dashboard.json from the same address, once a second). It shows the
// cluster as the node sees it: members and their state (down as soon as a
// member stops answering, before its lease expires), pools with media and
// capacity, protection and objects at risk, scrub, repair, tiering and
// staging progress, the last minutes of throughput, requests and latency,
// and a log of what changed since the page was opened.
//
// In the browser, window.aquiferLayout() checks the page's own layout
// (texts inside their charts, no overlapping texts, no nan/inf/exponents
// shown, nothing wider than the window) for tests.
#pragma once

namespace aq::server {

extern const char kDashboardPage[];

}  // namespace aq::server
