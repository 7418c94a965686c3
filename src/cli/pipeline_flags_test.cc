// The pipeline's flags come from its option schema: every option is a flag
// or says why not, the help shows each one's doc and default, and a flag
// sets exactly what the Python keyword of the same option sets.
#include "cli/pipeline_flags.h"

#include <gtest/gtest.h>

#include <map>

namespace aq::cli {
namespace {

using pipeline::OptionValue;

// Parses `args` (after the program name) into options; the status of
// Apply, or of the parse.
Status Parse(std::vector<std::string> args, pipeline::PipelineOptions& options, std::string* help = nullptr) {
  CLI::App app("test");
  PipelineFlags flags;
  flags.Add(&app);
  if (help != nullptr) *help = app.help();
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  return flags.Apply(options);
}

std::map<std::string_view, OptionValue> Values(const pipeline::PipelineOptions& o) {
  std::map<std::string_view, OptionValue> out;
  for (const auto& spec : pipeline::OptionSchema()) out[spec.name] = spec.get(o);
  return out;
}

TEST(PipelineFlagsTest, EveryOptionIsAFlagOrSaysWhyNot) {
  for (const auto& spec : pipeline::OptionSchema()) {
    if (!FlagFor(spec).empty()) continue;
    bool explained = false;
    for (const auto& s : FlagSpellings()) explained |= s.option == spec.name && !s.not_a_flag.empty();
    EXPECT_TRUE(explained) << spec.name << " is no flag and no reason is given";
  }
  // A flag that turns an option off cannot borrow the doc of what on means.
  for (const auto& spec : pipeline::OptionSchema()) {
    if (spec.type != pipeline::OptionType::kBool || spec.default_text != "True") continue;
    bool own_help = false;
    for (const auto& s : FlagSpellings()) own_help |= s.option == spec.name && !s.help.empty();
    EXPECT_TRUE(own_help) << FlagFor(spec) << " needs help of its own";
  }
  for (const auto& s : FlagSpellings()) {
    EXPECT_NE(pipeline::FindOption(s.option), nullptr) << s.option << " is spelled but not an option";
  }
}

TEST(PipelineFlagsTest, TheHelpShowsEachFlagWithItsDocAndDefault) {
  pipeline::PipelineOptions o;
  std::string help;
  ASSERT_TRUE(Parse({"data"}, o, &help).ok());
  for (const auto& spec : pipeline::OptionSchema()) {
    const std::string flag = FlagFor(spec);
    if (flag.empty() || flag == "data") continue;
    const std::string longest = flag.substr(flag.rfind(',') == std::string::npos ? 0 : flag.rfind(',') + 1);
    EXPECT_NE(help.find(longest), std::string::npos) << longest << " missing from the help";
    std::string_view doc = spec.doc;
    for (const auto& s : FlagSpellings()) {
      if (s.option == spec.name && !s.help.empty()) doc = s.help;
    }
    EXPECT_NE(help.find(std::string(doc.substr(0, 30))), std::string::npos) << spec.name << "'s help missing";
  }
  EXPECT_NE(help.find("[default: 256]"), std::string::npos) << help;
  EXPECT_NE(help.find("[default: 0.08,1.0]"), std::string::npos) << help;
}

TEST(PipelineFlagsTest, NoFlagsLeaveTheDefaults) {
  pipeline::PipelineOptions given, defaults;
  ASSERT_TRUE(Parse({"some/data"}, given).ok());
  defaults.data = "some/data";
  EXPECT_EQ(Values(given), Values(defaults));
}

TEST(PipelineFlagsTest, EachFlagSetsWhatItsKeywordSets) {
  // Every flag, a value other than its default, and the keyword's value.
  struct Case {
    std::vector<std::string> args;
    std::string_view option;
    OptionValue keyword;
  };
  const std::vector<Case> cases = {
      {{"-f", "wds"}, "format", std::string("wds")},
      {{"--root-policy", "pinned"}, "root_policy", std::string("pinned")},
      {{"-b", "32"}, "batch_size", int64_t{32}},
      {{"--batch", "48"}, "batch_size", int64_t{48}},
      {{"--size", "299"}, "image_size", int64_t{299}},
      {{"--eval"}, "training", false},
      {{"--eval-resize", "320"}, "eval_resize", int64_t{320}},
      {{"--crop-scale", "0.25,0.75"}, "crop_scale", std::vector<double>{0.25, 0.75}},
      {{"--crop-ratio", "0.5,2"}, "crop_ratio", std::vector<double>{0.5, 2}},
      {{"--jitter", "0.4,0.3,0.2"}, "jitter", std::vector<double>{0.4, 0.3, 0.2}},
      {{"--bbox-crop"}, "bbox_crop", true},
      {{"--dtype", "fp16"}, "dtype", std::string("float16")},
      {{"--layout", "nhwc"}, "layout", std::string("NHWC")},
      {{"--mean", "0.5,0.5,0.5"}, "mean", std::vector<double>{0.5, 0.5, 0.5}},
      {{"--std", "0.25,0.5,1"}, "std", std::vector<double>{0.25, 0.5, 1}},
      {{"--no-normalize"}, "normalize", false},
      {{"--seed", "77"}, "seed", int64_t{77}},
      {{"--no-shuffle"}, "shuffle", false},
      {{"--shuffle-buffer", "9"}, "shuffle_buffer", int64_t{9}},
      {{"--no-file-shuffle"}, "shuffle_files", false},
      {{"--first-epoch", "3"}, "first_epoch", int64_t{3}},
      {{"--epochs", "4"}, "epochs", int64_t{4}},
      {{"--start-step", "5"}, "start_step", int64_t{5}},
      {{"--remainder", "pad"}, "remainder", std::string("pad")},
      {{"--readers", "3"}, "readers", int64_t{3}},
      {{"--plan-ahead", "64"}, "plan_ahead", int64_t{64}},
      {{"--prefetch", "6"}, "prefetch", int64_t{6}},
      {{"--memory-limit", "3GiB"}, "memory_limit", std::string("3GiB")},
      {{"--on-error", "fail"}, "on_error", std::string("fail")},
      {{"--raw-labels"}, "labels_zero_based", false},
      {{"--allow-empty-classes"}, "allow_empty_classes", true},
      {{"--wds-image", "png"}, "wds_image", std::string("png")},
      {{"--wds-label", "txt"}, "wds_label", std::string("txt")},
      {{"--no-dct-scaling"}, "dct_scaling", false},
      {{"--eval-dct-scaling"}, "eval_dct_scaling", true},
      {{"--fast-idct"}, "fast_idct", true},
      {{"--no-damage-check"}, "damage_check", false},
      {{"--no-manifest"}, "use_manifest", false},
      {{"--no-verify-crc"}, "verify_crc", false},
      {{"--fields", "bbox,text"}, "fields", std::vector<std::string>{"bbox", "text"}},
  };
  std::map<std::string_view, bool> covered;
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("d");
    pipeline::PipelineOptions by_flag, by_keyword;
    const Status s = Parse(args, by_flag);
    ASSERT_TRUE(s.ok()) << args[0] << ": " << s.ToString();
    by_keyword.data = "d";
    ASSERT_TRUE(pipeline::SetOption(by_keyword, c.option, c.keyword).ok()) << c.option;
    EXPECT_EQ(Values(by_flag), Values(by_keyword)) << args[0];
    EXPECT_NE(Values(by_flag), Values(pipeline::PipelineOptions{})) << args[0] << " changed nothing";
    covered[c.option] = true;
  }
  for (const auto& spec : pipeline::OptionSchema()) {
    if (!FlagFor(spec).empty() && spec.name != "data") EXPECT_TRUE(covered[spec.name]) << spec.name << " untested";
  }
}

TEST(PipelineFlagsTest, ABadValueIsRefusedNamingItsFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch", "many"}, "--batch many: 'many' is not a whole number"},
      {{"--batch", "0"}, "--batch 0: option batch_size: expected a whole number from 1"},
      {{"--jitter", "0.4,0.4"}, "--jitter 0.4,0.4: expected 3 numbers"},
      {{"--jitter", "0.4,x,0.4"}, "'x' is not a number"},
      {{"--dtype", "int7"}, "--dtype int7: option dtype:"},
      {{"--memory-limit", "lots"}, "--memory-limit lots: option memory_limit:"},
      {{"--crop-scale", "0.9,0.1"}, "--crop-scale 0.9,0.1: option crop_scale: expected 0 < min <= max <= 1"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> all = args;
    all.push_back("d");
    pipeline::PipelineOptions o;
    const Status s = Parse(all, o);
    EXPECT_FALSE(s.ok()) << args[0];
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
  }
  pipeline::PipelineOptions o;
  EXPECT_FALSE(Parse({}, o).ok()) << "the data is required";
}

}  // namespace
}  // namespace aq::cli
