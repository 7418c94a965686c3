// The input pipeline's options as command-line flags, declared from
// pipeline::OptionSchema as the Python binding's keywords are: each flag's
// name comes from the option's (batch_size: --batch-size, or a spelling of
// the CLI's own below), its help and shown default from the option's doc
// and default, and its value is set through pipeline::SetOption, so a flag
// and a keyword accept and refuse the same values with the same words.
//
// A boolean option is a flag that turns it to the opposite of its default
// (bbox_crop: --bbox-crop; damage_check: --no-damage-check). Lists are
// written with commas (--jitter 0.4,0.4,0.4, --fields bbox,label).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "pipeline/options_schema.h"
#include "pipeline/pipeline.h"

namespace aq::cli {

// Where the command line departs from the schema: a flag that is not the
// option's name in kebab case, help of its own (every flag that turns a
// default-on option off has one: the doc says what on means), or no flag at
// all (`not_a_flag` says why).
struct FlagSpelling {
  std::string_view option, flag, help, not_a_flag;
};
const std::vector<FlagSpelling>& FlagSpellings();

// The flag of a schema option ("" if the command line does not take it).
std::string FlagFor(const pipeline::OptionSpec& spec);

class PipelineFlags {
 public:
  // Adds one flag per option the command line takes to `cmd`, the data
  // positional included.
  void Add(CLI::App* cmd);
  // Sets every flag given on `options`, in the schema's order; an error
  // names the flag and the value.
  Status Apply(pipeline::PipelineOptions& options) const;

 private:
  struct Flag {
    const pipeline::OptionSpec* spec = nullptr;
    std::string name;  // as on the command line
    CLI::Option* option = nullptr;
    std::string text;  // the value given (options)
  };
  std::vector<std::unique_ptr<Flag>> flags_;
};

}  // namespace aq::cli
