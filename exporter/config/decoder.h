#pragma once

// The YAML reading that every file an operator gives the exporter shares (the configuration,
// the web configuration): text checks before the parser, and a decoder that collects every
// problem with its file:line:column and key path instead of stopping at the first.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/config/env.h"
#include "exporter/config/text_checks.h"
#include "exporter/config/units.h"

namespace podnet::config {

inline std::string Quote(const std::string& s) { return "\"" + s + "\""; }

/// Parses `text` (from `file`) as YAML after the checks yaml-cpp cannot do well: not UTF-8,
/// nested more than 64 levels (yaml-cpp gives up near 400 with only "bad file"), a bracket never
/// closed (yaml-cpp reports the end of the input). std::nullopt with one Error in *errors when
/// the text is not YAML.
std::optional<YAML::Node> LoadYaml(const std::string& text, const std::string& file,
                                   std::vector<Error>* errors);

// Bounds on hostile files: problems reported (each unknown key is one), and nesting (yaml-cpp
// recurses per level and gives up near 400 levels with only "bad file").
constexpr std::size_t kMaxErrors = 100;
constexpr int kMaxNesting = 64;

// Walks the YAML tree, collecting every problem instead of stopping at the first one, so that
// --config.check prints all of them in one run.
class Decoder {
 public:
  Decoder(std::string file, const EnvLookup& env, std::vector<Error>* errors,
          std::vector<Error>* warnings)
      : file_(std::move(file)), env_(env), errors_(errors), warnings_(warnings) {}

  void Fail(const YAML::Node& at, const std::string& path, std::string message) {
    if (errors_->size() >= kMaxErrors) {
      ++not_shown_;  // millions of unknown keys must not cost millions of messages
      return;
    }
    errors_->push_back(At(at, path, std::move(message)));
  }
  std::size_t not_shown() const { return not_shown_; }

  /// From now on, each CheckMap adds the dotted path of every key it knows to `*out`, list
  /// indices written as [] ("peers.static[].port"): the schema of the sections a parse reached.
  void RecordKnownKeys(std::set<std::string>* out) { known_keys_ = out; }

  void Warn(const YAML::Node& at, const std::string& path, std::string message) {
    warnings_->push_back(At(at, path, std::move(message)));
  }

  Error At(const YAML::Node& at, const std::string& path, std::string message) {
    Error e;
    e.file = file_;
    if (at.IsDefined()) {
      YAML::Mark m = at.Mark();
      if (m.line >= 0) {
        e.line = m.line + 1;
        e.column = m.column + 1;
      }
    }
    e.key_path = path;
    e.message = std::move(message);
    return e;
  }

  // Checks that `node` is a mapping (null counts as empty) whose keys are all in `known` and
  // none repeated. Returns false when it is not a mapping at all.
  bool CheckMap(const YAML::Node& node, const std::string& path,
                std::initializer_list<std::string_view> known) {
    return CheckMap(node, path, std::span<const std::string_view>(known.begin(), known.size()));
  }
  bool CheckMap(const YAML::Node& node, const std::string& path,
                std::span<const std::string_view> known) {
    if (known_keys_ != nullptr) {
      for (auto k : known) known_keys_->insert(WithoutIndices(Join(path, std::string(k))));
    }
    if (node.IsNull()) return true;
    if (!node.IsMap()) {
      Fail(node, path, "must be a mapping");
      return false;
    }
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;  // a copy: it->first is a temporary of yaml-cpp
      if (!key.IsScalar()) {
        Fail(key, path, "keys must be strings");
        continue;
      }
      std::string name = key.Scalar();
      std::string child = Join(path, name);
      if (!seen.insert(name).second) {
        Fail(key, child, "duplicate key");
        continue;
      }
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        Fail(key, child, "unknown key (known keys: " + list + ")");
      }
    }
    return true;
  }

  std::optional<std::string> String(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      Fail(node, path, "must be a string");
      return std::nullopt;
    }
    std::string err;
    std::vector<std::string> unset;
    auto v = ExpandEnv(node.Scalar(), env_, &err, &unset);
    if (!v) Fail(node, path, err);
    if (v && !IsValidUtf8(*v)) {
      // Only an environment variable can bring it here (the file was checked whole); names
      // become label values, which must be UTF-8.
      Fail(node, path, "is not valid UTF-8 after ${VAR} expansion");
      return std::nullopt;
    }
    if (v) {
      if (auto at = FindControlCharacter(*v)) {
        // Values become label values, log text and /podnet/info: a NUL, a newline or a terminal
        // escape there is never meant (the Kubernetes strings get the same treatment).
        Fail(node, path,
             "must not contain control characters, found " + at->first + " at byte " +
                 std::to_string(at->second));
        return std::nullopt;
      }
    }
    for (const auto& name : unset) {
      Warn(node, path, "environment variable " + name + " is not set; it expanded to \"\"");
    }
    return v;
  }

  std::optional<long long> Integer(const YAML::Node& node, const std::string& path, long long min,
                                   long long max) {
    if (!IsScalarOr(node, path, "an integer")) return std::nullopt;
    auto s = String(node, path);
    if (!s) return std::nullopt;
    long long v = 0;
    auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
    if (s->empty() || ec != std::errc{} || ptr != s->data() + s->size()) {
      Fail(node, path, "must be an integer, got " + Quote(*s));
      return std::nullopt;
    }
    if (v < min || v > max) {
      Fail(node, path,
           "must be from " + std::to_string(min) + " to " + std::to_string(max) + ", got " + *s);
      return std::nullopt;
    }
    return v;
  }

  /// YAML 1.2 core booleans only (true/false, any case): "yes"/"on" are errors, not guesses.
  std::optional<bool> Bool(const YAML::Node& node, const std::string& path) {
    if (!IsScalarOr(node, path, "true or false")) return std::nullopt;
    auto s = String(node, path);
    if (!s) return std::nullopt;
    std::string lower;
    for (char ch : *s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "true") return true;
    if (lower == "false") return false;
    Fail(node, path, "must be true or false, got " + Quote(*s));
    return std::nullopt;
  }

  std::optional<Duration> PositiveDuration(const YAML::Node& node, const std::string& path) {
    auto s = String(node, path);
    if (!s) return std::nullopt;
    auto d = ParseDuration(*s);
    if (!d) {
      Fail(node, path, "invalid duration " + Quote(*s) + " (examples: 50ms, 10s, 15m, 1h30m)");
      return std::nullopt;
    }
    if (d->count() <= 0) {
      Fail(node, path, "must be a positive duration, got " + Quote(*s));
      return std::nullopt;
    }
    return d;
  }

  std::optional<net::HostPort> ListenAddress(const YAML::Node& node, const std::string& path) {
    auto s = String(node, path);
    if (!s) return std::nullopt;
    std::string err;
    auto hp = net::ParseHostPort(*s, &err);
    if (!hp) Fail(node, path, err);
    return hp;
  }

  /// Whether `node` is a scalar; if not, fails with "must be <what>, got <a list, a mapping or
  /// nothing>" (a typed key's error names its type, not String's "must be a string").
  bool IsScalarOr(const YAML::Node& node, const std::string& path, const std::string& what) {
    if (node.IsScalar()) return true;
    Fail(node, path,
         "must be " + what + ", got " +
             (node.IsSequence() ? "a list"
              : node.IsMap()    ? "a mapping"
                                : "nothing (null)"));
    return false;
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  /// `path` with every list index dropped: "peers.static[2].port" -> "peers.static[].port".
  static std::string WithoutIndices(const std::string& path) {
    std::string out;
    bool in_index = false;
    for (char ch : path) {
      if (ch == '[') in_index = true;
      if (ch == ']') in_index = false;
      if (!in_index || ch == '[') out += ch;
    }
    return out;
  }

 private:
  std::string file_;
  const EnvLookup& env_;
  std::vector<Error>* errors_;
  std::vector<Error>* warnings_;
  std::size_t not_shown_ = 0;
  std::set<std::string>* known_keys_ = nullptr;
};

/// Keys of the mapping `n` (at `base`) that must be present, non-empty strings; each one found is
/// stored in its field. False when any is missing, empty or not a string (each one reported in
/// `d`).
bool RequiredStrings(Decoder& d, const YAML::Node& n, const std::string& base,
                     std::initializer_list<std::pair<const char*, std::string*>> fields);

/// Optional duration keys of a section at `base`: each one present is decoded into its field
/// (Decoder::PositiveDuration); a bad one is reported in `d` and leaves its field as it was.
void OptionalDurations(Decoder& d, const YAML::Node& n, const std::string& base,
                       std::initializer_list<std::pair<const char*, Duration*>> fields);

/// An optional integer key of a section at `base`: when present and in [min, max], stored in
/// *out; otherwise reported in `d`, *out left as it was.
template <typename T>
void OptionalInteger(Decoder& d, const YAML::Node& n, const std::string& base, const char* key,
                     long long min, long long max, T* out) {
  if (const YAML::Node v = n[key]; v.IsDefined()) {
    if (auto i = d.Integer(v, base + "." + key, min, max)) *out = static_cast<T>(*i);
  }
}

/// A positive byte size at `v` (e.g. 500MB, 20GB, 1GiB; units.h, ParseSize), in bytes;
/// std::nullopt, reported in `d`, when it is not one.
std::optional<std::uint64_t> PositiveSize(Decoder& d, const YAML::Node& v, const std::string& path);

/// config::Parse, also adding to `*known_keys` every key the parser accepts in each mapping it
/// reached in `text`, as a dotted path with list indices written [] ("peers.static[].port",
/// "probes.dns.cluster_dns.max_servers"); `metrics.families` is one key (its names are
/// MetricFamilies()). A text that reaches every section yields the whole schema:
/// tests/unit/config/reference_docs_test.cc checks docs/configuration.md against it.
LoadResult Parse(const std::string& text, const std::string& file, const EnvLookup& env,
                 std::set<std::string>* known_keys);

}  // namespace podnet::config
