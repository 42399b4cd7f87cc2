#pragma once

// The web configuration every Prometheus exporter reads from --web.config.file
// (prometheus/exporter-toolkit's format, docs/web-configuration.md there): TLS for the HTTP
// port, HTTP basic auth, and response headers.

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/config/config.h"

namespace podnet::web {

/// tls_server_config.client_auth_type, with Go's crypto/tls meanings.
enum class ClientAuth {
  kNoClientCert,                // no certificate asked for
  kRequestClientCert,           // asked for, not required, not verified
  kRequireAnyClientCert,        // required, not verified
  kVerifyClientCertIfGiven,     // not required; verified against client_ca_file when given
  kRequireAndVerifyClientCert,  // required and verified against client_ca_file (mutual TLS)
};

struct TlsServerConfig {
  std::string cert_file;       // PEM chain, server certificate first; absolute path
  std::string key_file;        // PEM private key; absolute path
  std::string client_ca_file;  // PEM CA bundle for client certificates; "" = none
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  int min_version = 0;  // OpenSSL protocol version (TLS1_2_VERSION, ...); default TLS 1.2
  int max_version = 0;  // 0: the highest OpenSSL supports (TLS 1.3)
  /// OpenSSL cipher list for TLS 1.2 and lower, translated from Go's IANA-style names
  /// ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" → "ECDHE-RSA-AES128-GCM-SHA256"); "" = OpenSSL's
  /// default. TLS 1.3 suites are not configurable (as in Go).
  std::string cipher_list;
  bool prefer_server_cipher_suites = true;
};

struct WebConfig {
  std::string file;
  std::shared_ptr<const TlsServerConfig> tls;  // null: plain HTTP
  /// basic_auth_users: user name → bcrypt hash ($2a$, $2b$ or $2y$); empty: no auth.
  std::map<std::string, std::string> users;
  /// http_server_config.headers, added to every response.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct WebConfigResult {
  std::shared_ptr<const WebConfig> config;  // null when there are errors
  std::vector<config::Error> errors;        // each with file:line:column and key path
};

/// Parses a web configuration. Relative file paths are relative to the directory of `file`
/// (as exporter-toolkit does). Checks exporter-toolkit makes at load: cert_file and key_file
/// both given; client_auth_type one of the five names; client_ca_file given when the type
/// verifies certificates, and not given with NoClientCert; min/max_version TLS10..TLS13 and
/// min ≤ max; every cipher suite a known TLS 1.2 name; headers only the five security headers
/// exporter-toolkit allows (X-Content-Type-Options must be "nosniff", X-Frame-Options "deny" or
/// "sameorigin"); every password a bcrypt hash. Unknown and duplicate keys are errors. Whether
/// the certificate files load is checked by LoadTlsContext (tls_context.h). Never throws.
WebConfigResult ParseWebConfig(const std::string& text, const std::string& file);

/// Reads `path` (a regular file of at most 64 KiB) and parses it.
WebConfigResult LoadWebConfig(const std::string& path);

}  // namespace podnet::web
