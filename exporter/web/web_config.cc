#include "exporter/web/web_config.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "exporter/config/decoder.h"
#include "exporter/config/read_file.h"

namespace podnet::web {
namespace {

using config::Decoder;

// A web configuration is a few lines; 64 KiB holds thousands of basic_auth users.
constexpr std::size_t kMaxWebConfigBytes = 64 * 1024;

// exporter-toolkit reads values as they are: no ${VAR} expansion (a bcrypt hash is full of $).
std::optional<std::string> Raw(Decoder& d, const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) {
    d.Fail(node, path, "must be a string");
    return std::nullopt;
  }
  return node.Scalar();
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Go's crypto/tls names of the TLS 1.2 suites exporter-toolkit accepts → OpenSSL's names
// (openssl-ciphers(1), "TLS v1.2 cipher suites").
const std::map<std::string, std::string, std::less<>>& CipherNames() {
  static const std::map<std::string, std::string, std::less<>> names = {
      {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
      {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
      {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
      {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
      {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"},
      {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
      {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
      {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
      {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
      {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
      {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
      {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
      {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
  };
  return names;
}

std::optional<int> TlsVersion(Decoder& d, const YAML::Node& n, const std::string& path) {
  auto v = Raw(d, n, path);
  if (!v) return std::nullopt;
  static const std::map<std::string, int, std::less<>> versions = {{"TLS10", TLS1_VERSION},
                                                                   {"TLS11", TLS1_1_VERSION},
                                                                   {"TLS12", TLS1_2_VERSION},
                                                                   {"TLS13", TLS1_3_VERSION}};
  auto it = versions.find(*v);
  if (it == versions.end()) {
    d.Fail(n, path, "must be TLS10, TLS11, TLS12 or TLS13, got " + config::Quote(*v));
    return std::nullopt;
  }
  return it->second;
}

// A bcrypt hash as crypt(5) describes it: $2a$, $2b$ or $2y$, a two-digit cost 04..31, "$",
// then 53 characters of bcrypt's base-64 alphabet (22 of salt, 31 of hash).
bool IsBcryptHash(const std::string& h) {
  if (h.size() != 60 || h[0] != '$' || h[1] != '2' || h[3] != '$' || h[6] != '$') return false;
  if (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') return false;
  if (!std::isdigit(static_cast<unsigned char>(h[4])) ||
      !std::isdigit(static_cast<unsigned char>(h[5]))) {
    return false;
  }
  int cost = (h[4] - '0') * 10 + (h[5] - '0');
  if (cost < 4 || cost > 31) return false;
  return std::all_of(h.begin() + 7, h.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '/';
  });
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(dir) / path).lexically_normal().string();
}

// tls_server_config.client_auth_type into tls->client_auth, and whether client_ca_file agrees
// with it (a verifying type needs one; NoClientCert takes none).
void DecodeClientAuth(Decoder& d, const YAML::Node& n, const std::string& base,
                      TlsServerConfig* tls) {
  const YAML::Node auth = n["client_auth_type"];
  if (auth.IsDefined()) {
    static const std::map<std::string, ClientAuth, std::less<>> types = {
        {"NoClientCert", ClientAuth::kNoClientCert},
        {"RequestClientCert", ClientAuth::kRequestClientCert},
        {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
        {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
        {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert}};
    if (auto s = Raw(d, auth, base + ".client_auth_type")) {
      auto it = types.find(*s);
      if (it == types.end()) {
        d.Fail(auth, base + ".client_auth_type",
               "must be NoClientCert, RequestClientCert, RequireAnyClientCert, "
               "VerifyClientCertIfGiven or RequireAndVerifyClientCert, got " +
                   config::Quote(*s));
      } else {
        tls->client_auth = it->second;
      }
    }
  }
  bool verifies = tls->client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                  tls->client_auth == ClientAuth::kRequireAndVerifyClientCert;
  if (verifies && tls->client_ca_file.empty()) {
    d.Fail(auth, base + ".client_ca_file",
           "missing: client_auth_type verifies client certificates against it");
  }
  if (!tls->client_ca_file.empty() && tls->client_auth == ClientAuth::kNoClientCert) {
    d.Fail(n["client_ca_file"], base + ".client_ca_file",
           "a client CA is given but client_auth_type is NoClientCert (set it, e.g. to "
           "RequireAndVerifyClientCert)");
  }
}

// tls_server_config.cipher_suites (Go's names) as OpenSSL's cipher list in tls->cipher_list.
void DecodeCipherSuites(Decoder& d, const YAML::Node& v, const std::string& base,
                        TlsServerConfig* tls) {
  if (!v.IsSequence()) {
    d.Fail(v, base + ".cipher_suites", "must be a list of cipher suite names");
  } else {
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::string path = base + ".cipher_suites[" + std::to_string(i) + "]";
      auto s = Raw(d, v[i], path);
      if (!s) continue;
      auto it = CipherNames().find(*s);
      if (it == CipherNames().end()) {
        d.Fail(v[i], path,
               "unknown TLS 1.2 cipher suite " + config::Quote(*s) +
                   " (Go's names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)");
        continue;
      }
      tls->cipher_list += (tls->cipher_list.empty() ? "" : ":") + it->second;
    }
  }
}

void DecodeTls(Decoder& d, const YAML::Node& n, const std::string& dir, WebConfig& c) {
  const std::string base = "tls_server_config";
  if (n.IsNull()) return;  // an empty section: plain HTTP, as exporter-toolkit does
  if (!d.CheckMap(n, base,
                  {"cert_file", "key_file", "client_auth_type", "client_ca_file", "cipher_suites",
                   "min_version", "max_version", "prefer_server_cipher_suites"})) {
    return;
  }
  auto tls = std::make_shared<TlsServerConfig>();
  auto file = [&](const char* key, std::string* out) {
    if (const YAML::Node v = n[key]; v.IsDefined()) {
      if (auto s = Raw(d, v, base + "." + key)) *out = Resolve(dir, *s);
    }
  };
  file("cert_file", &tls->cert_file);
  file("key_file", &tls->key_file);
  file("client_ca_file", &tls->client_ca_file);
  if (tls->cert_file.empty()) d.Fail(n, base + ".cert_file", "missing (a PEM certificate file)");
  if (tls->key_file.empty()) d.Fail(n, base + ".key_file", "missing (a PEM private key file)");
  DecodeClientAuth(d, n, base, tls.get());
  tls->min_version = TLS1_2_VERSION;
  if (const YAML::Node v = n["min_version"]; v.IsDefined()) {
    if (auto ver = TlsVersion(d, v, base + ".min_version")) tls->min_version = *ver;
  }
  if (const YAML::Node v = n["max_version"]; v.IsDefined()) {
    if (auto ver = TlsVersion(d, v, base + ".max_version")) {
      tls->max_version = *ver;
      if (*ver < tls->min_version) d.Fail(v, base + ".max_version", "is below min_version");
    }
  }
  if (const YAML::Node v = n["cipher_suites"]; v.IsDefined()) {
    DecodeCipherSuites(d, v, base, tls.get());
  }
  if (const YAML::Node v = n["prefer_server_cipher_suites"]; v.IsDefined()) {
    if (auto b = d.Bool(v, base + ".prefer_server_cipher_suites")) {
      tls->prefer_server_cipher_suites = *b;
    }
  }
  c.tls = std::move(tls);
}

void DecodeHttpServer(Decoder& d, const YAML::Node& n, WebConfig& c) {
  const std::string base = "http_server_config";
  if (!d.CheckMap(n, base, {"http2", "headers"})) return;
  if (const YAML::Node v = n["http2"]; v.IsDefined()) {
    // Accepted for compatibility; the port speaks HTTP/1.1 (Prometheus scrapes with it).
    d.Bool(v, base + ".http2");
  }
  const YAML::Node headers = n["headers"];
  if (!headers.IsDefined() || headers.IsNull()) return;
  // The headers exporter-toolkit allows (web/config.go), with their fixed values where it
  // fixes them.
  static const std::map<std::string, std::vector<std::string>, std::less<>> allowed = {
      {"content-security-policy", {}},
      {"x-frame-options", {"deny", "sameorigin"}},
      {"x-content-type-options", {"nosniff"}},
      {"x-xss-protection", {}},
      {"strict-transport-security", {}}};
  if (!headers.IsMap()) {
    d.Fail(headers, base + ".headers", "must be a mapping of header names to values");
    return;
  }
  for (auto it = headers.begin(); it != headers.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    std::string path = base + ".headers." + (key.IsScalar() ? key.Scalar() : "?");
    auto name = Raw(d, key, path);
    auto v = Raw(d, value, path);
    if (!name || !v) continue;
    auto rule = allowed.find(Lower(*name));
    if (rule == allowed.end()) {
      d.Fail(key, path,
             "not a header the web configuration may set (Content-Security-Policy, "
             "X-Frame-Options, X-Content-Type-Options, X-XSS-Protection, "
             "Strict-Transport-Security)");
      continue;
    }
    if (!rule->second.empty() &&
        std::find(rule->second.begin(), rule->second.end(), Lower(*v)) == rule->second.end()) {
      std::string list;
      for (const auto& a : rule->second) list += (list.empty() ? "" : " or ") + a;
      d.Fail(value, path, "must be " + list + ", got " + config::Quote(*v));
      continue;
    }
    if (v->find_first_of("\r\n") != std::string::npos || v->find('\0') != std::string::npos) {
      d.Fail(value, path, "must be one line");
      continue;
    }
    c.headers.emplace_back(*name, *v);
  }
}

void DecodeUsers(Decoder& d, const YAML::Node& n, WebConfig& c) {
  const std::string base = "basic_auth_users";
  if (n.IsNull()) return;
  if (!n.IsMap()) {
    d.Fail(n, base, "must be a mapping of user names to bcrypt hashes");
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    const YAML::Node key = it->first;
    std::string path = base + "." + (key.IsScalar() ? key.Scalar() : "?");
    auto user = Raw(d, key, path);
    auto hash = Raw(d, it->second, path);
    if (!user || !hash) continue;
    if (user->empty() || user->find(':') != std::string::npos) {
      d.Fail(key, path, "a user name must be non-empty and without ':' (RFC 7617 §2)");
      continue;
    }
    if (!IsBcryptHash(*hash)) {
      d.Fail(it->second, path,
             "must be a bcrypt hash ($2y$10$ and 53 characters; make one with "
             "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`), not a password");
      continue;
    }
    if (!c.users.emplace(*user, *hash).second) d.Fail(key, path, "duplicate user");
  }
}

}  // namespace

WebConfigResult ParseWebConfig(const std::string& text, const std::string& file) {
  WebConfigResult result;
  auto loaded = config::LoadYaml(text, file, &result.errors);
  if (!loaded) return result;
  const YAML::Node root = *loaded;
  auto c = std::make_shared<WebConfig>();
  c->file = file;
  std::vector<config::Error> warnings;
  config::EnvLookup no_env = [](const std::string&) { return std::optional<std::string>(); };
  Decoder d(file, no_env, &result.errors, &warnings);
  std::string dir = std::filesystem::path(file).parent_path().string();
  try {
    if (!root.IsMap() && !root.IsNull()) {
      d.Fail(root, "", "the web configuration must be a mapping at the top level");
      return result;
    }
    d.CheckMap(root, "", {"tls_server_config", "http_server_config", "basic_auth_users"});
    if (const YAML::Node n = root["tls_server_config"]; n.IsDefined()) DecodeTls(d, n, dir, *c);
    if (const YAML::Node n = root["http_server_config"]; n.IsDefined()) {
      DecodeHttpServer(d, n, *c);
    }
    if (const YAML::Node n = root["basic_auth_users"]; n.IsDefined()) DecodeUsers(d, n, *c);
  } catch (const YAML::Exception& e) {  // defensive: yaml-cpp throws on odd node shapes
    d.Fail(root, "", std::string("unexpected YAML structure: ") + e.what());
  }
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const config::Error& a, const config::Error& b) {
                     return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                   });
  if (result.errors.empty()) result.config = std::move(c);
  return result;
}

WebConfigResult LoadWebConfig(const std::string& path) {
  std::string error;
  auto text = config::ReadRegularFile(path, kMaxWebConfigBytes, &error);
  if (!text) {
    WebConfigResult r;
    r.errors.push_back(config::Error{path, 0, 0, "", "cannot read the file: " + error});
    return r;
  }
  return ParseWebConfig(*text, path);
}

}  // namespace podnet::web
