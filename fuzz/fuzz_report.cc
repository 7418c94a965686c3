// Any bytes that parse as JSON must render as a report (and a text summary)
// without crashing or throwing: result files are read back from disk.
#include <cstddef>
#include <cstdint>
#include <string>

#include "report/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  std::vector<aq::report::Input> inputs = {{"fuzz.json", j}};
  std::string html = aq::report::RenderHtml(inputs, "fuzz");
  std::string text = aq::report::TextSummary(inputs);
  if (html.empty()) __builtin_trap();  // the page always has its frame
  return 0;
}
