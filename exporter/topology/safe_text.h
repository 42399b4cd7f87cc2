#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace podnet::topology {

/// Longest names the Kubernetes API accepts (apimachinery pkg/util/validation/validation.go;
/// https://kubernetes.io/docs/concepts/overview/working-with-objects/names/ and
/// .../working-with-objects/labels/#syntax-and-character-set), in bytes (the API allows ASCII
/// only, so characters and bytes agree):
///  - a DNS-1123 subdomain (DNS1123SubdomainMaxLength): Pod, Node, Service and EndpointSlice
///    names;
inline constexpr std::size_t kMaxSubdomainBytes = 253;
///  - a label value (LabelValueMaxLength): a zone (the Node's topology.kubernetes.io/zone), and
///    here also the bound of short enum-like fields (Service trafficDistribution,
///    internalTrafficPolicy, a watch event's type), which become label values too.
inline constexpr std::size_t kMaxLabelValueBytes = 63;
/// Free text a peer or the API server sends back (a Status message, a gRPC status message),
/// kept for log lines and /-/ready only.
inline constexpr std::size_t kMaxMessageBytes = 512;

/// What SafeText changed, summed over the strings it was given.
struct TextRepairs {
  std::uint64_t truncated = 0;  // strings cut at their bound
  std::uint64_t escaped = 0;    // strings holding a control character, NUL or invalid UTF-8

  bool any() const { return truncated + escaped > 0; }
};

/// `in` as text that is safe as a Prometheus label value, a log field and a terminal line:
/// valid UTF-8 of at most `max_bytes` bytes, with no control character.
///  - C0 controls and DEL (U+0000–U+001F, U+007F: NUL, ESC, CR, LF …) and every byte that is not
///    part of well-formed UTF-8 (Unicode 15, table 3-7: no overlong forms, surrogates or code
///    points past U+10FFFF) become `\xNN` (the byte in lower-case hex); C1 controls
///    (U+0080–U+009F: terminals act on U+009B CSI as on ESC [) become `\u00NN`. So an escape
///    sequence is shown, never acted on.
///  - Longer than `max_bytes` (after escaping): cut at a character or escape boundary and ended
///    by the marker "…" (U+2026, 3 bytes), the whole at most `max_bytes`.
/// Text that needs neither comes back unchanged. Counts what it did in *repairs (when given).
/// Sources of the bounds: the constants above.
std::string SafeText(std::string_view in, std::size_t max_bytes, TextRepairs* repairs = nullptr);

}  // namespace podnet::topology
