#include "exporter/discovery/kubernetes/api_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "exporter/config/read_file.h"

namespace podnet::discovery::kubernetes {
namespace {

// RFC 4648 base64 (kubeconfig's *-data fields); whitespace is skipped, '=' ends the data.
std::optional<std::string> DecodeBase64(const std::string& in) {
  std::string out;
  unsigned int acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=')
      break;
    else if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<unsigned int>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string JoinPath(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

// The `name:` entry of a kubeconfig list (`clusters`, `users`, `contexts`), or an undefined node.
// yaml-cpp: a missing key of a const node is an invalid node, whose Type() throws; IsDefined()
// is the one question it answers. So every look-up goes through these.
bool IsMap(const YAML::Node& n) { return n.IsDefined() && n.IsMap(); }
bool Has(const YAML::Node& map, const char* key) { return IsMap(map) && map[key].IsDefined(); }

std::string Scalar(const YAML::Node& map, const char* key) {
  if (!IsMap(map)) return "";
  const YAML::Node v = map[key];
  return v.IsDefined() && v.IsScalar() ? v.as<std::string>() : "";
}

YAML::Node FindNamed(const YAML::Node& list, const std::string& name, const char* field) {
  if (!list.IsDefined() || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& item : list) {
    if (IsMap(item) && Scalar(item, "name") == name && Has(item, field)) return item[field];
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// `inline_key` (base64) or `file_key` (a path) of `map`; "" when neither is set.
std::optional<std::string> DataOrFile(const YAML::Node& map, const char* inline_key,
                                      const char* file_key, const std::string& base_dir,
                                      const std::string& what, std::string* error) {
  if (std::string data = Scalar(map, inline_key); !data.empty()) {
    auto decoded = DecodeBase64(data);
    if (!decoded) *error = what + "." + inline_key + ": not valid base64";
    return decoded;
  }
  if (std::string file = Scalar(map, file_key); !file.empty()) {
    std::string err;
    auto text = ReadSmallFile(JoinPath(base_dir, file), &err);
    if (!text) *error = what + "." + file_key + ": " + err;
    return text;
  }
  return std::string();
}

// https://HOST[:PORT][/] with HOST a name, an IPv4 literal or a bracketed IPv6 literal.
bool ParseServer(const std::string& server, ApiConfig* c, std::string* error) {
  constexpr std::string_view kScheme = "https://";
  if (server.rfind(kScheme, 0) != 0) {
    *error = "server \"" + server + "\": only https:// API servers are supported";
    return false;
  }
  std::string rest = server.substr(kScheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    if (rest.find_first_not_of('/', slash) != std::string::npos) {
      *error = "server \"" + server + "\": a path prefix is not supported";
      return false;
    }
    rest.resize(slash);
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos) {
      *error = "server \"" + server + "\": unterminated [IPv6 address]";
      return false;
    }
    c->host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') {
        *error = "server \"" + server + "\": junk after ]";
        return false;
      }
      port = rest.substr(close + 2);
    }
  } else if (auto colon = rest.find(':'); colon != std::string::npos) {
    c->host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  } else {
    c->host = rest;
  }
  c->port = 443;
  if (!port.empty()) {
    unsigned int p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc{} || ptr != port.data() + port.size() || p == 0 || p > 65535) {
      *error = "server \"" + server + "\": bad port";
      return false;
    }
    c->port = static_cast<std::uint16_t>(p);
  }
  if (c->host.empty()) {
    *error = "server \"" + server + "\": no host";
    return false;
  }
  return true;
}

}  // namespace

std::string TrimSpace(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::optional<std::string> ReadSmallFile(const std::string& path, std::string* error) {
  // Tokens, certificates and kubeconfigs are a few KiB; 1 MiB leaves room and bounds the rest.
  auto text = config::ReadRegularFile(path, 1 << 20, error);
  if (!text) *error = path + ": " + *error;
  return text;
}

std::string ApiConfig::Url() const {
  bool v6 = host.find(':') != std::string::npos;
  return "https://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<ApiConfig> InClusterConfig(const std::string& sa_dir, const config::EnvLookup& env,
                                         std::string* error) {
  auto host = env("KUBERNETES_SERVICE_HOST");
  auto port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    *error =
        "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set "
        "(use --kubeconfig outside a cluster)";
    return std::nullopt;
  }
  ApiConfig c;
  // The kubelet sets an IPv6 host without brackets; a URL would need them, we keep it bare.
  std::string h = *host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (!ParseServer(
          "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + *port, &c,
          error)) {
    *error = "KUBERNETES_SERVICE_HOST/PORT: " + *error;
    return std::nullopt;
  }
  auto ca = ReadSmallFile(sa_dir + "/ca.crt", error);
  if (!ca) return std::nullopt;
  c.ca_pem = *ca;
  c.token_file = sa_dir + "/token";
  std::string err;
  if (!ReadSmallFile(c.token_file, &err)) {
    *error = err;
    return std::nullopt;
  }
  c.source = "in-cluster (" + sa_dir + ")";
  return c;
}

namespace {

// A kubeconfig cluster (`what`: "clusters[NAME]") into *c: its server, TLS verification and CA;
// false and *error for a bad server, a proxy, or a CA that cannot be read.
bool ReadCluster(const YAML::Node& cluster, const std::string& what, const std::string& base_dir,
                 ApiConfig* c, std::string* error) {
  if (!ParseServer(Scalar(cluster, "server"), c, error)) {
    *error = what + "." + *error;
    return false;
  }
  if (Scalar(cluster, "proxy-url") != "") {
    *error = what + ".proxy-url: proxies are not supported";
    return false;
  }
  c->insecure_skip_tls_verify = Scalar(cluster, "insecure-skip-tls-verify") == "true";
  auto ca = DataOrFile(cluster, "certificate-authority-data", "certificate-authority", base_dir,
                       what, error);
  if (!ca) return false;
  c->ca_pem = *ca;
  return true;
}

// A kubeconfig user's credentials (`what`: "users[NAME]") into *c: a token, a token file or a
// client certificate and key; false and *error for a credential plugin (exec, auth-provider),
// a certificate without its key, or a file that cannot be read.
bool ReadUser(const YAML::Node& user, const std::string& what, const std::string& base_dir,
              ApiConfig* c, std::string* error) {
  if (Has(user, "exec") || Has(user, "auth-provider")) {
    *error = what +
             ": exec and auth-provider credential plugins are not supported; use a "
             "token, tokenFile or client certificate (e.g. a ServiceAccount token)";
    return false;
  }
  c->token = TrimSpace(Scalar(user, "token"));
  if (std::string f = Scalar(user, "tokenFile"); !f.empty()) {
    c->token_file = JoinPath(base_dir, f);
  }
  auto cert =
      DataOrFile(user, "client-certificate-data", "client-certificate", base_dir, what, error);
  if (!cert) return false;
  auto key = DataOrFile(user, "client-key-data", "client-key", base_dir, what, error);
  if (!key) return false;
  if (cert->empty() != key->empty()) {
    *error = what + ": a client certificate needs its key and a key its certificate";
    return false;
  }
  c->client_cert_pem = *cert;
  c->client_key_pem = *key;
  return true;
}

}  // namespace

std::optional<ApiConfig> ParseKubeconfig(const std::string& text, const std::string& base_dir,
                                         const std::string& context, std::string* error) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    *error = "not valid YAML: " + e.msg + " at line " + std::to_string(e.mark.line + 1);
    return std::nullopt;
  }
  try {
    if (!IsMap(root)) {
      *error = "not a kubeconfig (no mapping at the top)";
      return std::nullopt;
    }
    std::string ctx_name = context.empty() ? Scalar(root, "current-context") : context;
    if (ctx_name.empty()) {
      *error = "no current-context";
      return std::nullopt;
    }
    const YAML::Node& croot = root;
    YAML::Node ctx = FindNamed(croot["contexts"], ctx_name, "context");
    if (!IsMap(ctx)) {
      *error = "context \"" + ctx_name + "\" not found in contexts";
      return std::nullopt;
    }
    std::string cluster_name = Scalar(ctx, "cluster");
    std::string user_name = Scalar(ctx, "user");
    YAML::Node cluster = FindNamed(croot["clusters"], cluster_name, "cluster");
    if (!IsMap(cluster)) {
      *error = "context \"" + ctx_name + "\": cluster \"" + cluster_name + "\" not found";
      return std::nullopt;
    }
    ApiConfig c;
    std::string what = "clusters[" + cluster_name + "]";
    if (!ReadCluster(cluster, what, base_dir, &c, error)) return std::nullopt;
    if (!user_name.empty()) {
      YAML::Node user = FindNamed(croot["users"], user_name, "user");
      what = "users[" + user_name + "]";
      if (!user.IsDefined()) {
        *error = "context \"" + ctx_name + "\": user \"" + user_name + "\" not found";
        return std::nullopt;
      }
      // `user: {}` or `user:` alone: no credentials
      if (IsMap(user) && !ReadUser(user, what, base_dir, &c, error)) return std::nullopt;
    }
    c.source = "context " + ctx_name;
    return c;
  } catch (const YAML::Exception& e) {
    *error = std::string("bad kubeconfig: ") + e.what();
    return std::nullopt;
  }
}

std::optional<ApiConfig> LoadKubeconfig(const std::string& path, const std::string& context,
                                        std::string* error) {
  auto text = ReadSmallFile(path, error);
  if (!text) return std::nullopt;
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty()) dir = "/";
  auto c = ParseKubeconfig(*text, dir, context, error);
  if (!c) {
    *error = path + ": " + *error;
    return std::nullopt;
  }
  c->source = "kubeconfig " + path + " " + c->source;
  return c;
}

}  // namespace podnet::discovery::kubernetes
