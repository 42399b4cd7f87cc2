// Configuration files as hostile input (the break test's cases): each gets one clear error with
// the file and, where there is one, the line and column, quickly and without a crash.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "exporter/config/config.h"
#include "exporter/config/text_checks.h"

namespace podnet::config {
namespace {

EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

std::string Dump(const std::vector<Error>& errors) {
  std::string out;
  for (const auto& e : errors) out += "  " + e.ToString() + "\n";
  return out.empty() ? "  (no errors)\n" : out;
}

// A temporary path that is removed at the end of the test.
class TempPath {
 public:
  TempPath() {
    char p[] = "/tmp/podnet-hostile-XXXXXX";
    int fd = mkstemp(p);
    if (fd >= 0) close(fd);
    path_ = p;
  }
  ~TempPath() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  void Write(const std::string& text) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << text;
  }

 private:
  std::string path_;
};

const std::string kSelf = "self:\n  name: pod-a\n  node: node-a\n";

TEST(HostileConfigTest, FifoIsRefusedWithoutWaitingForAWriter) {
  TempPath t;
  std::remove(t.path().c_str());
  ASSERT_EQ(mkfifo(t.path().c_str(), 0600), 0);
  LoadResult r = LoadFile(t.path(), NoEnv());  // before: blocked in open() forever
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_EQ(r.errors[0].ToString(),
            t.path() + ": cannot read the file: it is a FIFO (only regular files are read)");
}

TEST(HostileConfigTest, DevZeroIsRefused) {
  LoadResult r = LoadFile("/dev/zero", NoEnv());  // before: bad_alloc, SIGABRT
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_EQ(r.errors[0].ToString(),
            "/dev/zero: cannot read the file: it is a character device "
            "(only regular files are read)");
}

TEST(HostileConfigTest, TooLargeIsRefusedBeforeParsing) {
  TempPath t;
  t.Write(kSelf + "# " + std::string(kMaxFileBytes, 'x') + "\n");
  LoadResult r = LoadFile(t.path(), NoEnv());
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_NE(r.errors[0].message.find("is more than the limit of 524288 bytes"), std::string::npos)
      << r.errors[0].message;
  // At the limit it is read (and parsed).
  t.Write(kSelf + "#" + std::string(kMaxFileBytes - kSelf.size() - 2, 'x') + "\n");
  EXPECT_TRUE(LoadFile(t.path(), NoEnv()).ok());
}

TEST(HostileConfigTest, NonUtf8NameIsAnErrorWithItsPlace) {
  // Before: passed --config.check, then /podnet/info answered 500 and /metrics failed promtool
  // (invalid label value "peer-\xff").
  LoadResult r = Parse(kSelf +
                           "peers:\n  static:\n    - { name: peer-\xff, address: 10.0.0.1, "
                           "node: n }\n",
                       "test.yaml", NoEnv());
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_EQ(r.errors[0].line, 6);
  EXPECT_EQ(r.errors[0].column, 20);
  EXPECT_NE(r.errors[0].message.find("not valid UTF-8"), std::string::npos);
  // Through the environment too.
  EnvLookup env = [](const std::string&) -> std::optional<std::string> { return "pod-\xc3\x28"; };
  r = Parse("self:\n  name: ${POD_NAME}\n  node: n\n", "test.yaml", env);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0].ToString(),
            "test.yaml:2:9: self.name: is not valid UTF-8 after ${VAR} expansion");
  // UTF-8 itself is fine.
  EXPECT_TRUE(Parse("self:\n  name: pod-\xc3\xa9\n  node: n\n", "test.yaml", NoEnv()).ok());
}

TEST(HostileConfigTest, DeepNestingIsReportedWhereItGoesTooDeep) {
  // Before: "malformed YAML: bad file" (yaml-cpp's recursion limit) with no useful place.
  LoadResult flow =
      Parse(kSelf + "metrics: " + std::string(10000, '[') + std::string(10000, ']') + "\n",
            "test.yaml", NoEnv());
  ASSERT_EQ(flow.errors.size(), 1u) << Dump(flow.errors);
  EXPECT_EQ(flow.errors[0].ToString(), "test.yaml:4:73: nested more than 64 levels deep");
  std::string block = kSelf;
  for (int i = 0; i < 10000; ++i) block += std::string(i, ' ') + "k:\n";
  LoadResult b = Parse(block, "test.yaml", NoEnv());
  ASSERT_EQ(b.errors.size(), 1u) << Dump(b.errors);
  EXPECT_EQ(b.errors[0].ToString(), "test.yaml:68:65: nested more than 64 levels deep");
}

TEST(HostileConfigTest, ManyUnknownKeysAreBoundedInProblems) {
  // Before: 3M unknown keys took 61 s and 4.1 GB; the file limit bounds the keys, and the
  // report stops at 100 problems and says how many more there were.
  std::string text = kSelf;
  for (int i = 0; text.size() < kMaxFileBytes - 16; ++i) text += "k" + std::to_string(i) + ": 1\n";
  LoadResult r = Parse(text, "test.yaml", NoEnv());
  ASSERT_EQ(r.errors.size(), 101u);
  // Every top-level key after self is unknown: one problem each, 100 listed.
  std::size_t keys = 0;
  for (std::size_t at = text.find("\nk"); at != std::string::npos; at = text.find("\nk", at + 1))
    ++keys;
  EXPECT_EQ(r.problem_count(), keys);
  EXPECT_EQ(r.not_shown, keys - 100);
  EXPECT_EQ(r.errors.back().message, std::to_string(keys - 100) + " more problems not shown")
      << r.errors.back().ToString();
}

TEST(HostileConfigTest, ControlCharactersInValuesAreErrors) {
  // Values become label values, log text and /podnet/info: a BEL, an escape sequence, a C1
  // control or a NUL from ${VAR} is refused with its place, whichever way it was written.
  EXPECT_FALSE(FindControlCharacter("plain \xc3\xa9 \xe2\x82\xac text"));
  EXPECT_EQ(FindControlCharacter("ab\x1b[31m"), std::make_pair(std::string("U+001B"), 2ul));
  EXPECT_EQ(FindControlCharacter("z\xc2\x9b"), std::make_pair(std::string("U+009B"), 1ul));
  EXPECT_EQ(FindControlCharacter("x\x7f"), std::make_pair(std::string("U+007F"), 1ul));
  LoadResult r = Parse(
      "self:\n  name: \"pod\\e[31mred\"\n  node: \"node\\ax\"\n"
      "  zone: \"z\\u0085\"\n",
      "test.yaml", NoEnv());
  ASSERT_EQ(r.errors.size(), 3u) << Dump(r.errors);
  EXPECT_EQ(
      r.errors[0].ToString(),
      "test.yaml:2:9: self.name: must not contain control characters, found U+001B at byte 3");
  EXPECT_EQ(
      r.errors[1].ToString(),
      "test.yaml:3:9: self.node: must not contain control characters, found U+0007 at byte 4");
  EXPECT_EQ(
      r.errors[2].ToString(),
      "test.yaml:4:9: self.zone: must not contain control characters, found U+0085 at byte 1");
  EnvLookup env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "POD_NAME") return std::string("a\nb", 3);
    return std::nullopt;
  };
  r = Parse("self:\n  name: ${POD_NAME}\n  node: n\n", "test.yaml", env);
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_EQ(
      r.errors[0].ToString(),
      "test.yaml:2:9: self.name: must not contain control characters, found U+000A at byte 1");
}

TEST(HostileConfigTest, UnclosedBracketIsReportedWhereItOpens) {
  // Before: reported at 3:1, a line the 2-line file does not have.
  LoadResult r = Parse("self: {name: a, node: n}\npeers: [\n", "test.yaml", NoEnv());
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_EQ(r.errors[0].ToString(), "test.yaml:2:8: malformed YAML: this [ is never closed");
  r = Parse("self: {name: a, node: n\n", "test.yaml", NoEnv());
  ASSERT_EQ(r.errors.size(), 1u) << Dump(r.errors);
  EXPECT_EQ(r.errors[0].ToString(), "test.yaml:1:7: malformed YAML: this { is never closed");
  // Brackets inside quotes and comments do not count.
  EXPECT_TRUE(Parse("self: {name: \"a[\", node: 'n{'}  # [\n", "test.yaml", NoEnv()).ok());
}

TEST(TextChecksTest, Utf8) {
  EXPECT_FALSE(FindInvalidUtf8("plain ascii\nand \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  auto at = FindInvalidUtf8("ab\ncd\xff");
  ASSERT_TRUE(at);
  EXPECT_EQ(at->line, 2);
  EXPECT_EQ(at->column, 3);
  EXPECT_TRUE(FindInvalidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_TRUE(FindInvalidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_TRUE(FindInvalidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(FindInvalidUtf8("\xe2\x82"));          // cut short
}

TEST(TextChecksTest, NestingCountsFlowAndBlockLevels) {
  EXPECT_EQ(ScanNesting("a:\n  b:\n    c: [1, {d: 2}]\n", 64).depth, 5);
  EXPECT_EQ(ScanNesting("a:\n- - - x\n", 64).depth, 4);
  EXPECT_FALSE(ScanNesting("a: \"[\" # [\nb: it's [x]\n", 64).unclosed);
}

}  // namespace
}  // namespace podnet::config
