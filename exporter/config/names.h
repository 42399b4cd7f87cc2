#pragma once

// The names the configuration accepts where a name is written: DNS names as the C library's
// resolver takes them, and Kubernetes object names.

#include <string>
#include <string_view>

namespace podnet::config {

/// A host name as getaddrinfo takes it: 1..253 characters (one trailing dot allowed), labels of
/// 1..63 characters, no blanks, control characters or '|'.
bool ValidDnsName(const std::string& name);

/// A Kubernetes object name as namespaces and Services take it: an RFC 1123 label, 1..63
/// characters of a-z, 0-9 and '-', starting and ending with a letter or digit (Kubernetes
/// apimachinery validation.IsDNS1123Label;
/// kubernetes.io/docs/concepts/overview/working-with-objects/names).
bool ValidKubernetesName(std::string_view s);

}  // namespace podnet::config
