// JSON text for what holds file names: names are bytes, JSON strings are
// Unicode. A name that is not valid UTF-8 (a Latin-1 `caf\xe9.jpg` left by
// an old camera or archive) is written with each byte that breaks it as a
// lone surrogate escape, "\udce9", the form Python's surrogateescape error
// handler (os.fsdecode, json.loads) reads: os.fsencode() of the decoded
// string gives the raw bytes back. Valid UTF-8 is written as it is.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace aq::format {

// `j` as JSON text (indent as nlohmann's dump: -1 compact), every string and
// object key in it, at any depth, written as above. Never throws for
// invalid UTF-8, unlike nlohmann::json::dump.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

// Parses what DumpJson writes: a lone "\udcXX" escape (XX 80..ff) becomes
// the raw byte XX again, so names round-trip through files aquifer writes
// and reads (nlohmann::json::parse refuses lone surrogates). A discarded
// value (is_discarded()) where the text is not JSON.
nlohmann::json ParseJson(std::string_view text);

}  // namespace aq::format
