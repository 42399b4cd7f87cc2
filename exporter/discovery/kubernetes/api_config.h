#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "exporter/config/env.h"

namespace podnet::discovery::kubernetes {

/// Where the Kubernetes API server is and how to authenticate to it: the in-cluster
/// service-account configuration or one context of a kubeconfig file.
struct ApiConfig {
  std::string host;  // a DNS name or an IP literal (no brackets)
  std::uint16_t port = 443;
  std::string ca_pem;           // PEM bundle that signs the server's certificate; empty = system
  std::string token;            // a fixed bearer token (kubeconfig `user.token`)
  std::string token_file;       // or a file to re-read it from (service account, `tokenFile`)
  std::string client_cert_pem;  // TLS client authentication (kubeconfig), both or neither
  std::string client_key_pem;
  bool insecure_skip_tls_verify = false;  // kubeconfig `insecure-skip-tls-verify: true`
  std::string source;  // for log lines: "in-cluster" or "kubeconfig PATH context NAME"

  /// The API server's URL, "https://HOST:PORT" (an IPv6 host in brackets).
  std::string Url() const;
};

/// The default directory of the service-account credentials a Pod is given
/// (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/).
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT from `env`
/// (an IPv6 host is given without brackets, as the kubelet sets it), `sa_dir`/ca.crt as the CA
/// and `sa_dir`/token as the bearer token file (a projected token rotates about hourly, so it
/// is re-read, see ApiClient). Returns std::nullopt and sets *error when the variables are unset
/// or bad or ca.crt / token cannot be read.
std::optional<ApiConfig> InClusterConfig(const std::string& sa_dir, const config::EnvLookup& env,
                                         std::string* error);

/// One context of a kubeconfig (https://kubernetes.io/docs/concepts/configuration/
/// organize-cluster-access-kubeconfig/): `current-context` (or `context` when not empty), its
/// cluster's `server` (https only), `certificate-authority` / `-data` (base64 PEM),
/// `insecure-skip-tls-verify`, and its user's `token` / `tokenFile` / `client-certificate` /
/// `-data` / `client-key` / `-data`. Relative file paths are relative to the kubeconfig's
/// directory (`base_dir`). `exec` and `auth-provider` plugins are rejected with an error that
/// says so (this exporter runs no helper programs). Never throws.
std::optional<ApiConfig> ParseKubeconfig(const std::string& text, const std::string& base_dir,
                                         const std::string& context, std::string* error);

/// Reads `path` and calls ParseKubeconfig with its directory.
std::optional<ApiConfig> LoadKubeconfig(const std::string& path, const std::string& context,
                                        std::string* error);

/// `s` without leading and trailing white space (a token file ends with a newline).
std::string TrimSpace(std::string s);

/// Reads a whole (small) file: a regular file of at most 1 MiB (config::ReadRegularFile: a FIFO
/// or /dev/zero named as a token file is refused, not waited on or read forever); std::nullopt
/// and *error ("PATH: reason") when it cannot.
std::optional<std::string> ReadSmallFile(const std::string& path, std::string* error);

}  // namespace podnet::discovery::kubernetes
