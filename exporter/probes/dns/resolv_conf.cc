#include "exporter/probes/dns/resolv_conf.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace podnet::probes::dns {
namespace {

// glibc splits on these two only (res_init.c: the MATCH macro, the search loop, res_setoptions).
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// musl uses isspace(3) in the C locale: also \n \r \v \f (resolvconf.c, lookup_name.c).
bool IsSpace(char c) { return IsBlank(c) || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// `kw` at the start of `line`, followed by a byte `sep` accepts.
bool Keyword(std::string_view line, std::string_view kw, bool (*sep)(char)) {
  return line.size() > kw.size() && line.substr(0, kw.size()) == kw && sep(line[kw.size()]);
}

// Words of `s` separated by runs of bytes `sep` accepts.
std::vector<std::string> Split(std::string_view s, bool (*sep)(char)) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && sep(s[i])) ++i;
    std::size_t j = i;
    while (j < s.size() && !sep(s[j])) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// atoi(3) as glibc's res_setoptions calls it: (int) strtol(s, NULL, 10) (leading white space,
// a sign; no digits = 0; out of range saturates to LONG_MIN/LONG_MAX before the cast to int).
int Atoi(std::string_view s) {
  std::string z(s);
  return static_cast<int>(std::strtol(z.c_str(), nullptr, 10));
}

// musl: isdigit(p[0]) was checked; strtoul saturates at ULONG_MAX.
unsigned long Strtoul(std::string_view s) {
  std::string z(s);
  return std::strtoul(z.c_str(), nullptr, 10);
}

// glibc res_init.c (nameserver): the word ends at " \t\n"; IPv4 by __inet_aton_exact (the
// whole word, inet_aton's forms such as 127.1), else IPv6 by inet_pton up to a '%' whose scope
// (__inet6_scopeid_pton: interface name for link-local, else a number) is kept, an unknown one
// ignored (scope 0). Anything else, e.g. a word ending in '\r', is not a nameserver.
std::optional<ResolvConf::Nameserver> GlibcNameserver(std::string_view rest) {
  std::size_t i = 0;
  while (i < rest.size() && IsBlank(rest[i])) ++i;
  std::size_t j = rest.find_first_of(" \t\n", i);
  std::string w(rest.substr(i, j == std::string_view::npos ? j : j - i));
  if (w.empty()) return std::nullopt;
  in_addr a4{};
  if (w.find_first_of(" \t\n\r\v\f") == std::string::npos && ::inet_aton(w.c_str(), &a4) != 0) {
    boost::asio::ip::address_v4::bytes_type b;
    std::memcpy(b.data(), &a4, 4);
    return ResolvConf::Nameserver{boost::asio::ip::address_v4(b), 53};
  }
  std::string scope;
  if (auto pct = w.find('%'); pct != std::string::npos) {
    scope = w.substr(pct + 1);
    w.resize(pct);
  }
  in6_addr a6{};
  if (w.empty() || ::inet_pton(AF_INET6, w.c_str(), &a6) != 1) return std::nullopt;
  boost::asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), &a6, 16);
  // inet/inet6_scopeid_pton.c: an interface name for (multicast) link-/node-local addresses,
  // else a decimal number; a failure leaves the scope 0.
  unsigned long id = 0;
  if (!scope.empty()) {
    if (IN6_IS_ADDR_LINKLOCAL(&a6) || IN6_IS_ADDR_MC_NODELOCAL(&a6) ||
        IN6_IS_ADDR_MC_LINKLOCAL(&a6)) {
      id = ::if_nametoindex(scope.c_str());
    }
    if (id == 0 && std::isdigit(static_cast<unsigned char>(scope[0]))) {
      char* end = nullptr;
      unsigned long long n = std::strtoull(scope.c_str(), &end, 10);
      if (end && *end == 0 && n <= 0xffffffffULL) id = static_cast<unsigned long>(n);
    }
  }
  return ResolvConf::Nameserver{boost::asio::ip::address_v6(b, static_cast<unsigned>(id)), 53};
}

// musl lookup_ipliteral.c (AF_UNSPEC) on the word after "nameserver" (ended by isspace):
// IPv4 by __inet_aton, else IPv6 with an optional '%' scope: digits, or an interface name
// (if_nametoindex), which only a link-local address may carry; an unknown one drops the line.
std::optional<ResolvConf::Nameserver> MuslNameserver(std::string_view rest) {
  std::size_t i = 0;
  while (i < rest.size() && IsSpace(rest[i])) ++i;
  std::size_t j = i;
  while (j < rest.size() && !IsSpace(rest[j])) ++j;
  std::string w(rest.substr(i, j - i));
  in_addr a4{};
  if (!w.empty() && ::inet_aton(w.c_str(), &a4) != 0) {
    boost::asio::ip::address_v4::bytes_type b;
    std::memcpy(b.data(), &a4, 4);
    return ResolvConf::Nameserver{boost::asio::ip::address_v4(b), 53};
  }
  std::string scope;
  bool has_scope = false;
  if (auto pct = w.find('%'); pct != std::string::npos && pct < 64) {
    scope = w.substr(pct + 1);
    has_scope = true;
    w.resize(pct);
  }
  in6_addr a6{};
  if (::inet_pton(AF_INET6, w.c_str(), &a6) != 1) return std::nullopt;
  unsigned long long id = 0;
  if (has_scope) {
    std::size_t digits = 0;
    while (digits < scope.size() && std::isdigit(static_cast<unsigned char>(scope[digits])))
      ++digits;
    if (digits > 0) id = std::strtoull(scope.c_str(), nullptr, 10);
    if (digits == 0 || digits < scope.size()) {
      if (!IN6_IS_ADDR_LINKLOCAL(&a6) && !IN6_IS_ADDR_MC_LINKLOCAL(&a6)) return std::nullopt;
      id = ::if_nametoindex(scope.c_str());
      if (id == 0) return std::nullopt;
    }
    if (id > 0xffffffffULL) return std::nullopt;
  }
  boost::asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), &a6, 16);
  return ResolvConf::Nameserver{boost::asio::ip::address_v6(b, static_cast<unsigned>(id)), 53};
}

// glibc resolv/res_init.c res_setoptions: one "options" word list (file or RES_OPTIONS). Words
// are separated by ' ' and '\t' only and matched by prefix (strncmp), in this order.
void GlibcOptions(std::string_view text, ResolvConf& c) {
  for (const auto& o : Split(text, IsBlank)) {
    auto starts = [&](std::string_view k) { return o.compare(0, k.size(), k) == 0; };
    if (starts("ndots:")) {
      // int i = atoi(); i <= RES_MAXNDOTS ? i : 15, stored in `unsigned ndots:4` (res_state):
      // a negative value keeps its low 4 bits (ndots:-1 is 15).
      int i = Atoi(std::string_view(o).substr(6));
      c.ndots = i <= 15 ? static_cast<int>(static_cast<unsigned>(i) & 15U) : 15;
    } else if (starts("timeout:")) {
      int i = Atoi(std::string_view(o).substr(8));
      c.timeout_s = std::min(i, 30);  // RES_MAXRETRANS; <= 0 means send_dg's 1 s floor
    } else if (starts("attempts:")) {
      int i = Atoi(std::string_view(o).substr(9));
      c.attempts = std::max(0, std::min(i, 5));  // RES_MAXRETRY; <= 0: no try at all
    } else if (starts("rotate")) {
      c.rotate = true;
    } else if (starts("edns0")) {
      c.edns0 = true;
    } else if (starts("single-request-reopen")) {
      c.single_request_reopen = true;
    } else if (starts("single-request")) {
      c.single_request = true;
    } else if (starts("no_tld_query") || starts("no-tld-query")) {
      c.no_tld_query = true;
    } else if (starts("use-vc")) {
      c.use_vc = true;
    } else if (starts("trust-ad")) {
      c.trust_ad = true;
    } else if (starts("no-aaaa")) {
      c.no_aaaa = true;
    }
    // Anything else (debug, inet6, no-reload, unknown words) changes nothing we model.
  }
}

// musl src/network/resolvconf.c: strstr for "ndots:", "attempts:", "timeout:" in the whole
// line, a digit right after the colon, strtoul (saturating), capped at 15, 10 and 60.
void MuslOptions(std::string_view line, ResolvConf& c) {
  auto opt = [&](std::string_view key, unsigned long cap, int* out) {
    auto p = line.find(key);
    if (p == std::string_view::npos) return;
    auto rest = line.substr(p + key.size());
    if (rest.empty() || !std::isdigit(static_cast<unsigned char>(rest[0]))) return;
    *out = static_cast<int>(std::min(Strtoul(rest), cap));
  };
  opt("ndots:", 15, &c.ndots);
  opt("attempts:", 10, &c.attempts);
  opt("timeout:", 60, &c.timeout_s);
}

// glibc 2.36 resolv/res_init.c __res_vinit: getline (no length limit), '\n' ends a line.
void ParseGlibc(std::string_view text, const config::EnvLookup& env, ResolvConf& c) {
  std::optional<std::string> localdomain;
  if (env) localdomain = env("LOCALDOMAIN");
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos + 1);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line[0] == '#' || line[0] == ';') continue;
    auto rest_after = [&](std::size_t n) {
      std::string_view r = line.substr(n);
      while (!r.empty() && IsBlank(r[0])) r.remove_prefix(1);
      return r;
    };
    if (Keyword(line, "domain", IsBlank)) {
      if (localdomain) continue;  // LOCALDOMAIN overrides the file
      auto r = rest_after(6);
      if (r.empty() || r[0] == '\n') continue;
      c.search = {std::string(r.substr(0, r.find_first_of(" \t\n")))};
    } else if (Keyword(line, "search", IsBlank)) {
      if (localdomain) continue;
      auto r = rest_after(6);
      if (r.empty() || r[0] == '\n') continue;  // an empty search line keeps the previous list
      r = r.substr(0, r.find('\n'));
      c.search = Split(r, IsBlank);  // a '\r' stays part of the last domain
    } else if (Keyword(line, "nameserver", IsBlank)) {
      if (auto ns = GlibcNameserver(line.substr(10)); ns && c.nameservers.size() < 3) {
        c.nameservers.push_back(*ns);  // MAXNS: resolv_conf.c keeps the first three
      }
    } else if (Keyword(line, "options", IsBlank)) {
      GlibcOptions(line.substr(7), c);
    }
  }
  if (localdomain) {
    std::string_view ld(*localdomain);
    c.search = Split(ld.substr(0, ld.find('\n')), IsBlank);
  }
  if (env) {
    if (auto ro = env("RES_OPTIONS")) GlibcOptions(*ro, c);
  }
}

// musl 1.2.3 src/network/resolvconf.c __get_resolv_conf: fgets into a 256-byte buffer; a line
// that does not fit (more than 254 bytes before its '\n') is skipped whole.
void ParseMusl(std::string_view text, ResolvConf& c) {
  std::string search;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos + 1);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    std::size_t content = line.size() - (line.back() == '\n' ? 1 : 0);
    if (content > kMuslLineMax) continue;
    line = line.substr(0, line.find('\0'));  // fgets's buffer is a C string
    if (Keyword(line, "options", IsSpace)) {
      MuslOptions(line, c);
    } else if (Keyword(line, "nameserver", IsSpace)) {
      if (c.nameservers.size() >= 3) continue;
      if (auto ns = MuslNameserver(line.substr(11))) c.nameservers.push_back(*ns);
    } else if (Keyword(line, "domain", IsSpace) || Keyword(line, "search", IsSpace)) {
      search = std::string(line.size() > 7 ? line.substr(7) : std::string_view());
    }
  }
  // lookup_name.c name_from_dns_search: the search string split on isspace.
  c.search = Split(search, IsSpace);
}

}  // namespace

ResolvConf ParseResolvConf(std::string_view text, Libc libc, const config::EnvLookup& env) {
  ResolvConf c;
  if (libc == Libc::kGlibc) {
    ParseGlibc(text, env, c);
  } else {
    ParseMusl(text, c);
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
