#include "cli/pipeline_flags.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>

namespace aq::cli {

const std::vector<FlagSpelling>& FlagSpellings() {
  static const std::vector<FlagSpelling> spellings = {
      {"data", "data", "", ""},
      {"format", "-f,--format", "", ""},
      {"batch_size", "-b,--batch", "", ""},
      {"image_size", "--size", "", ""},
      {"training", "--eval", "Evaluation transform: resize the shorter side to --eval-resize, centre crop", ""},
      {"normalize", "", "Float outputs without (x - mean) / std", ""},
      {"shuffle", "", "Files in name order and no sample shuffle", ""},
      {"shuffle_files", "--no-file-shuffle", "Keep files in name order", ""},
      {"labels_zero_based", "--raw-labels", "Keep TFRecord's 1-based labels", ""},
      {"dct_scaling", "", "Never decode at 1/2, 1/4, 1/8 scale", ""},
      {"damage_check", "", "Stop reading a JPEG below its crop: faster, but damage there goes unreported", ""},
      {"use_manifest", "--no-manifest",
       "Read every JPEG to its end in the first epoch even where the dataset's aquifer-manifest.json vouches for it",
       ""},
      {"verify_crc", "", "Do not check the records' checksums", ""},
      {"threads", "", "", "the global -j/--threads"},
      {"encoded_images", "", "", "JPEGs left for a GPU decoder: the Python Loader's decode=\"gpu\""},
  };
  return spellings;
}

namespace {

const FlagSpelling* SpellingOf(std::string_view option) {
  for (const auto& s : FlagSpellings()) {
    if (s.option == option) return &s;
  }
  return nullptr;
}

}  // namespace

std::string FlagFor(const pipeline::OptionSpec& spec) {
  const FlagSpelling* own = SpellingOf(spec.name);
  if (own != nullptr && !own->not_a_flag.empty()) return "";
  if (own != nullptr && !own->flag.empty()) return std::string(own->flag);
  const bool inverted = spec.type == pipeline::OptionType::kBool && spec.default_text == "True";
  std::string flag = inverted ? "--no-" : "--";
  for (char c : spec.name) flag += c == '_' ? '-' : c;
  return flag;
}

namespace {

// The flag's help: the option's doc (or the command line's own words) and
// its default as the command line writes it.
std::string Help(const pipeline::OptionSpec& spec) {
  const FlagSpelling* own = SpellingOf(spec.name);
  std::string help(own != nullptr && !own->help.empty() ? own->help : spec.doc);
  if (spec.type == pipeline::OptionType::kBool) return help;
  std::string shown(spec.default_text);
  if (shown == "None" || shown.empty()) return help;
  if (shown.front() == '(' && shown.back() == ')') shown = shown.substr(1, shown.size() - 2);
  std::string compact;
  for (char c : shown) {
    if (c != ' ') compact += c;
  }
  return fmt::format("{} [default: {}]", help, compact);
}

std::string TypeName(const pipeline::OptionSpec& spec) {
  switch (spec.type) {
    case pipeline::OptionType::kInt: return "INT";
    case pipeline::OptionType::kFloat: return "FLOAT";
    case pipeline::OptionType::kFloats: return spec.count == 2 ? "X,Y" : "X,Y,Z";
    case pipeline::OptionType::kTexts: return "A,B,...";
    default: return spec.choices.empty() ? "TEXT" : "CHOICE";
  }
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

Result<double> Number(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0) {
    return InvalidArgument(fmt::format("'{}' is not a number", text));
  }
  return v;
}

// The text given as the value the schema's type takes.
Result<pipeline::OptionValue> Value(const pipeline::OptionSpec& spec, const std::string& text) {
  switch (spec.type) {
    case pipeline::OptionType::kBool: return pipeline::OptionValue(spec.default_text != "True");
    case pipeline::OptionType::kInt: {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return InvalidArgument(fmt::format("'{}' is not a whole number", text));
      }
      return pipeline::OptionValue(v);
    }
    case pipeline::OptionType::kFloat: return pipeline::OptionValue(AQ_TRY(Number(text)));
    case pipeline::OptionType::kText: return pipeline::OptionValue(text);
    case pipeline::OptionType::kFloats: {
      std::vector<double> v;
      for (const auto& part : Split(text)) v.push_back(AQ_TRY(Number(part)));
      if (v.size() != spec.count) {
        return InvalidArgument(fmt::format("expected {} numbers separated by commas, not '{}'", spec.count, text));
      }
      return pipeline::OptionValue(std::move(v));
    }
    case pipeline::OptionType::kTexts: return pipeline::OptionValue(Split(text));
  }
  return InvalidArgument("unknown option type");
}

}  // namespace

void PipelineFlags::Add(CLI::App* cmd) {
  for (const auto& spec : pipeline::OptionSchema()) {
    const std::string name = FlagFor(spec);
    if (name.empty()) continue;
    auto flag = std::make_unique<Flag>();
    flag->spec = &spec;
    flag->name = name;
    if (spec.type == pipeline::OptionType::kBool) {
      flag->option = cmd->add_flag(name)->description(Help(spec));
    } else {
      flag->option = cmd->add_option(name, flag->text, Help(spec))->type_name(TypeName(spec));
    }
    if (spec.name == "data") flag->option->required();
    flags_.push_back(std::move(flag));
  }
}

Status PipelineFlags::Apply(pipeline::PipelineOptions& options) const {
  for (const auto& flag : flags_) {
    if (flag->option->count() == 0) continue;
    const std::string shown = flag->option->get_lnames().empty() ? flag->name : "--" + flag->option->get_lnames()[0];
    auto value = Value(*flag->spec, flag->text);
    if (!value.ok()) return InvalidArgument(fmt::format("{} {}: {}", shown, flag->text, value.status().message()));
    if (Status s = pipeline::SetOption(options, flag->spec->name, *value); !s.ok()) {
      if (flag->spec->type == pipeline::OptionType::kBool)
        return InvalidArgument(fmt::format("{}: {}", shown, s.message()));
      return InvalidArgument(fmt::format("{} {}: {}", shown, flag->text, s.message()));
    }
  }
  return Status::Ok();
}

}  // namespace aq::cli
