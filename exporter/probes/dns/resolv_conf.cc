#include "exporter/probes/dns/resolv_conf.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace podnet::probes::dns {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// "keyword" at the start of `line` followed by a blank (glibc's MATCH macro; musl checks
// isspace after the keyword the same way).
bool Keyword(std::string_view line, std::string_view kw) {
  return line.size() > kw.size() && line.substr(0, kw.size()) == kw && IsBlank(line[kw.size()]);
}

std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (IsBlank(s[i]) || s[i] == '\n' || s[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < s.size() && !IsBlank(s[j]) && s[j] != '\n' && s[j] != '\r') ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Leading decimal digits of `s` as atoi reads them (glibc res_setoptions uses atoi; musl strtoul).
// nullopt when `s` does not start with a digit.
std::optional<long> LeadingNumber(std::string_view s) {
  long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (p == s.data() || ec != std::errc{} || v < 0) return std::nullopt;
  return v;
}

std::optional<ResolvConf::Nameserver> ParseNameserver(std::string_view word, Libc libc) {
  std::string w(word);
  if (auto pct = w.find('%'); pct != std::string::npos) w.resize(pct);  // scope id dropped
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(w, ec);
  if (ec) return std::nullopt;
  return ResolvConf::Nameserver{addr, 53};
}

// glibc resolv/res_init.c res_setoptions: one "options" word list (file or RES_OPTIONS).
void GlibcOptions(const std::vector<std::string>& words, ResolvConf& c) {
  for (const auto& o : words) {
    auto num = [&](std::string_view key, int cap, int* out) {
      if (o.rfind(key, 0) != 0) return false;
      // atoi: no digits = 0.
      long v = LeadingNumber(std::string_view(o).substr(key.size())).value_or(0);
      *out = static_cast<int>(std::min<long>(v, cap));
      return true;
    };
    if (num("ndots:", 15, &c.ndots) || num("timeout:", 30, &c.timeout_s) ||
        num("attempts:", 5, &c.attempts)) {
      continue;
    }
    if (o == "rotate")
      c.rotate = true;
    else if (o == "single-request")
      c.single_request = true;
    else if (o == "single-request-reopen")
      c.single_request_reopen = true;
    else if (o == "edns0")
      c.edns0 = true;
    else if (o == "use-vc")
      c.use_vc = true;
    else if (o == "no-aaaa")
      c.no_aaaa = true;
    else if (o == "trust-ad")
      c.trust_ad = true;
    else if (o == "no-tld-query")
      c.no_tld_query = true;
    // Anything else (debug, inet6, no-reload, unknown words) changes nothing we model.
  }
}

// musl src/network/resolvconf.c: strstr for "ndots:", "attempts:", "timeout:" anywhere on the
// options line, a digit right after the colon, strtoul, capped.
void MuslOptions(std::string_view line, ResolvConf& c) {
  auto opt = [&](std::string_view key, int cap, int* out) {
    auto p = line.find(key);
    if (p == std::string_view::npos) return;
    auto rest = line.substr(p + key.size());
    if (rest.empty() || rest[0] < '0' || rest[0] > '9') return;
    if (auto v = LeadingNumber(rest)) *out = static_cast<int>(std::min<long>(*v, cap));
  };
  opt("ndots:", 15, &c.ndots);
  opt("attempts:", 10, &c.attempts);
  opt("timeout:", 60, &c.timeout_s);
}

}  // namespace

const char* LibcName(Libc l) { return l == Libc::kGlibc ? "glibc" : "musl"; }

std::optional<Libc> ParseLibc(std::string_view s) {
  if (s == "glibc") return Libc::kGlibc;
  if (s == "musl") return Libc::kMusl;
  return std::nullopt;
}

ResolvConf ParseResolvConf(std::string_view text, Libc libc, const config::EnvLookup& env) {
  ResolvConf c;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (Keyword(line, "nameserver")) {
      auto w = Words(line.substr(10));
      if (w.empty() || c.nameservers.size() >= 3) continue;
      if (auto ns = ParseNameserver(w[0], libc)) c.nameservers.push_back(*ns);
    } else if (Keyword(line, "domain")) {
      auto w = Words(line.substr(6));
      if (w.empty()) continue;
      // glibc: the first word is the one domain; musl keeps the whole rest of the line as its
      // search string, so "domain a b" searches a and b there.
      if (libc == Libc::kGlibc) w.resize(1);
      c.search = w;
    } else if (Keyword(line, "search")) {
      auto w = Words(line.substr(6));
      if (libc == Libc::kGlibc && w.empty()) continue;  // glibc keeps the previous list
      c.search = w;
    } else if (Keyword(line, "options")) {
      if (libc == Libc::kGlibc) {
        GlibcOptions(Words(line.substr(7)), c);
      } else {
        MuslOptions(line.substr(7), c);
      }
    }
  }
  if (libc == Libc::kGlibc && env) {
    if (auto ld = env("LOCALDOMAIN")) c.search = Words(*ld);
    if (auto ro = env("RES_OPTIONS")) GlibcOptions(Words(*ro), c);
  }
  if (c.nameservers.empty()) {
    c.nameservers.push_back({boost::asio::ip::make_address("127.0.0.1"), 53});
  }
  return c;
}

ResolvConf LoadResolvConf(const std::string& path, Libc libc, const config::EnvLookup& env,
                          bool* readable) {
  std::ifstream in(path, std::ios::binary);
  if (readable) *readable = static_cast<bool>(in);
  std::ostringstream buf;
  if (in) buf << in.rdbuf();
  return ParseResolvConf(buf.str(), libc, env);
}

}  // namespace podnet::probes::dns
