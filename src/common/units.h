// Formatting and parsing of sizes, rates and durations for people.
// SI units (1 MB = 10^6 bytes) by default, as in the storage documents;
// binary units (MiB) where asked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace aq::units {

std::string Bytes(double bytes);         // "1.23 GB"
std::string IecBytes(uint64_t bytes);    // "1 MiB", "256 KiB", "1.5 MiB": request and block sizes
std::string Rate(double bytes_per_sec);  // "512.0 MB/s"
std::string Duration(double seconds);    // "1h02m", "3m05s", "12.3s"
std::string Count(double n);             // "1.28 M"

// "4MiB", "4M" (MiB), "4MB" (SI), "1G", "512k", "1234" -> bytes.
Result<uint64_t> ParseBytes(std::string_view text);

// "90", "90s", "1.5m", "12h", "7d", "2w", "8ms", "500us" -> seconds (>= 0).
Result<double> ParseDuration(std::string_view text);

}  // namespace aq::units
