// UTF-8 validation, as object keys and metadata need it.
#pragma once

#include <cstddef>
#include <string_view>

namespace aq {

// The length of the UTF-8 sequence at s[i], or 0 when it is not valid
// (overlong forms, surrogates, beyond U+10FFFF, U+FFFE/U+FFFF all refused).
size_t Utf8Sequence(std::string_view s, size_t i);

// Whether all of `s` is valid UTF-8 (as Utf8Sequence).
bool IsUtf8(std::string_view s);

}  // namespace aq
