// The text indexes beside record files: one line per record holding two
// unsigned numbers separated by spaces or a tab ("offset size" for DALI's
// tfrecord2idx, "key<TAB>offset" for RecordIO's .idx). Blank lines and
// trailing CR or spaces are ignored; anything else is corruption naming the
// file and line.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "common/status.h"

namespace aq::format {

// Calls `line(number, a, b)` for every record line, in order; stops at its
// first error. `expected` describes a line for the error message.
Status ForEachIndexLine(std::string_view text, std::string_view name, std::string_view expected,
                        const std::function<Status(size_t line_no, uint64_t a, uint64_t b)>& line);

}  // namespace aq::format
